"""Baselines and drift checks per node: suites, the verdict rule, the versions and
settings record and its diff, and the check report. Pure: no I/O beyond reading a
suite file; the services run the suites and store the results."""
