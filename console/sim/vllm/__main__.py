"""Entry point of the simulated `vllm` command.

Two ways in: `python -m console.sim.vllm ...` (a package inside console), or, on a node, the
uploaded folder run as a script, `python3 <base>/sim/vllm serve ...` (the node agent's
supervisor recognises a `vllm` argument followed by `serve`). In the second case Python puts
the folder itself first on sys.path and runs this file as a plain module: the folder is taken
off sys.path (its module names must never shadow anything) and loaded as a package of its own.
"""

import sys

if __package__:
    from .cli import main
else:
    import importlib.util
    import os

    _HERE = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _HERE:
        del sys.path[0]
    _NAME = "rocm_console_sim_vllm"
    _spec = importlib.util.spec_from_file_location(
        _NAME, os.path.join(_HERE, "__init__.py"), submodule_search_locations=[_HERE]
    )
    if _spec is None or _spec.loader is None:  # pragma: no cover - the folder holds __init__.py
        raise SystemExit("vllm simulator: cannot load the package in " + _HERE)
    _package = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _package
    _spec.loader.exec_module(_package)
    main = importlib.import_module(_NAME + ".cli").main

if __name__ == "__main__":
    sys.exit(main())
