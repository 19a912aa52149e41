"""Energy, cost and carbon of a scenario: ``energy`` (static power x time + energy per FLOP and
per byte, calibrated by ``energy_params`` so a device draws its TDP at its ridge), ``cost``
(TCO: capex amortised + electricity x PUE; ``scenario_metrics`` combines all three) and
``carbon`` (operational by grid region + embodied). Built on ``analysis.analyze``'s report.
"""
