"""vLLM 0.32's failure texts: the tracebacks the server prints when it cannot start or dies."""

import os

from .constants import PYLIB, SITE


def tb_frame(path, line, func, code=None, caret=None):
    out = ['  File "%s", line %d, in %s' % (path, line, func)]
    if code is not None:
        out.append("    " + code)
        if caret:
            start = code.index(caret)
            out.append(" " * (4 + start) + "^" * len(caret))
    return out


def vllm_src(rel):
    return "%s/vllm/%s" % (SITE, rel)


def cli_frames(command, line, code):
    """The top of every `vllm` traceback: the script, the CLI's dispatch, the subcommand's cmd()."""
    return (
        ["Traceback (most recent call last):"]
        + tb_frame("/usr/local/bin/vllm", 8, "<module>", "sys.exit(main())", "main()")
        + tb_frame(vllm_src("entrypoints/cli/main.py"), 120, "main", "args.dispatch_function(args)")
        + tb_frame(vllm_src(command), line, "cmd", code)
    )


def asyncio_run_frame():
    """asyncio.run() handing its coroutine to a Runner (Python 3.12)."""
    return tb_frame(PYLIB + "/asyncio/runners.py", 195, "run", "return runner.run(main)", "runner.run(main)")


def runner_frame():
    """The Runner running the main task to completion (Python 3.12)."""
    return tb_frame(
        PYLIB + "/asyncio/runners.py",
        118,
        "run",
        "return self._loop.run_until_complete(task)",
        "self._loop.run_until_complete(task)",
    )


def api_head_frames():
    return (
        cli_frames("entrypoints/cli/serve.py", 156, "uvloop.run(run_server(args))")
        + tb_frame(SITE + "/uvloop/__init__.py", 96, "run", "return __asyncio.run(")
        + asyncio_run_frame()
        + runner_frame()
        + ['  File "uvloop/loop.pyx", line 1518, in uvloop.loop.Loop.run_until_complete']
        + tb_frame(SITE + "/uvloop/__init__.py", 48, "wrapper", "return await main", "await main")
    )


def _aenter():
    return tb_frame(
        PYLIB + "/contextlib.py", 210, "__aenter__", "return await anext(self.gen)", "await anext(self.gen)"
    )


def api_engine_frames():
    entry = vllm_src("entrypoints/launchers/api_server/entry.py")
    return (
        tb_frame(entry, 177, "run_server", "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)")
        + tb_frame(entry, 195, "run_server_worker", "async with build_async_engine_client(")
        + _aenter()
        + tb_frame(entry, 61, "build_async_engine_client", "async with build_async_engine_client_from_engine_args(")
        + _aenter()
    )


def port_in_use_traceback(exc):
    launcher = vllm_src("entrypoints/launchers/launcher.py")
    return (
        api_head_frames()
        + tb_frame(
            vllm_src("entrypoints/launchers/api_server/entry.py"),
            176,
            "run_server",
            "listen_address, sock = setup_server(args, reuse_port=False)",
            "setup_server(args, reuse_port=False)",
        )
        + tb_frame(
            vllm_src("tracing/otel.py"), 175, "sync_wrapper", "return func(*args, **kwargs)", "func(*args, **kwargs)"
        )
        + tb_frame(
            launcher,
            398,
            "setup_server",
            "sock = create_server_socket(sock_addr, reuse_port=reuse_port)",
            "create_server_socket(sock_addr, reuse_port=reuse_port)",
        )
        + tb_frame(launcher, 348, "create_server_socket", "sock.bind(addr)")
        + ["OSError: [Errno %d] %s" % (exc.errno or 0, os.strerror(exc.errno or 0))]
    )


def config_traceback(cls, details):
    """A pydantic ValidationError raised while building the engine config."""
    entry = vllm_src("entrypoints/launchers/api_server/entry.py")
    arg_utils = vllm_src("engine/arg_utils.py")
    return (
        api_head_frames()
        + api_engine_frames()
        + tb_frame(
            entry,
            83,
            "build_async_engine_client_from_engine_args",
            "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
            "engine_args.create_engine_config(usage_context=usage_context)",
        )
        + tb_frame(
            arg_utils,
            2240,
            "create_engine_config",
            "model_config = self.create_model_config()",
            "self.create_model_config()",
        )
        + tb_frame(arg_utils, 1955, "create_model_config", "return %s(" % cls, cls + "(")
        + tb_frame(
            SITE + "/pydantic/_internal/_dataclasses.py",
            121,
            "__init__",
            "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)",
        )
        + ["pydantic_core._pydantic_core.ValidationError: 1 validation error for %s" % cls]
        + details
    )


def engine_start_traceback():
    """The APIServer's traceback after the engine core failed to start."""
    core_client = vllm_src("v1/engine/core_client.py")
    utils = vllm_src("v1/engine/utils.py")
    async_llm = vllm_src("v1/engine/async_llm.py")
    return (
        api_head_frames()
        + api_engine_frames()
        + tb_frame(
            vllm_src("entrypoints/launchers/api_server/entry.py"),
            97,
            "build_async_engine_client_from_engine_args",
            "async_llm = AsyncLLM.from_vllm_config(",
            "AsyncLLM.from_vllm_config(",
        )
        + tb_frame(async_llm, 217, "from_vllm_config", "return cls(", "cls(")
        + tb_frame(
            async_llm,
            146,
            "__init__",
            "self.engine_core = EngineCoreClient.make_async_mp_client(",
            "EngineCoreClient.make_async_mp_client(",
        )
        + tb_frame(
            vllm_src("tracing/otel.py"), 178, "sync_wrapper", "return func(*args, **kwargs)", "func(*args, **kwargs)"
        )
        + tb_frame(
            core_client,
            130,
            "make_async_mp_client",
            "return AsyncMPClient(*client_args)",
            "AsyncMPClient(*client_args)",
        )
        + tb_frame(core_client, 1052, "__init__", "super().__init__(")
        + tb_frame(core_client, 620, "__init__", "with launch_core_engines(")
        + tb_frame(PYLIB + "/contextlib.py", 144, "__exit__", "next(self.gen)")
        + tb_frame(utils, 1119, "launch_core_engines", "wait_for_engine_startup(")
        + tb_frame(utils, 1178, "wait_for_engine_startup", "raise RuntimeError(")
        + ["RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]
    )


def engine_core_frames(stage):
    core = vllm_src("v1/engine/core.py")
    frames = (
        tb_frame(
            core,
            1103,
            "run_engine_core",
            "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
            "EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
        )
        + tb_frame(
            vllm_src("tracing/otel.py"), 178, "sync_wrapper", "return func(*args, **kwargs)", "func(*args, **kwargs)"
        )
        + tb_frame(core, 869, "__init__", "super().__init__(")
    )
    if stage == "init":
        executor = vllm_src("v1/executor/multiproc_executor.py")
        return (
            frames
            + tb_frame(
                core,
                110,
                "__init__",
                "self.model_executor = executor_class(vllm_config)",
                "executor_class(vllm_config)",
            )
            + tb_frame(vllm_src("v1/executor/abstract.py"), 103, "__init__", "self._init_executor()")
            + tb_frame(
                executor,
                176,
                "_init_executor",
                "self.workers = WorkerProc.wait_for_ready(unready_workers)",
                "WorkerProc.wait_for_ready(unready_workers)",
            )
            + tb_frame(executor, 683, "wait_for_ready", "raise e from None")
        )
    frames = (
        frames
        + tb_frame(
            core,
            125,
            "__init__",
            "kv_cache_config = self._initialize_kv_caches(vllm_config)",
            "self._initialize_kv_caches(vllm_config)",
        )
        + tb_frame(
            core,
            236,
            "_initialize_kv_caches",
            "available_gpu_memory = self.model_executor.determine_available_memory()"
            if stage == "profile"
            else "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
            "self.model_executor.determine_available_memory()" if stage == "profile" else None,
        )
    )
    if stage == "profile":
        executor = vllm_src("v1/executor/multiproc_executor.py")
        return (
            frames
            + tb_frame(
                vllm_src("v1/executor/abstract.py"),
                136,
                "determine_available_memory",
                'return self.collective_rpc("determine_available_memory")',
                'self.collective_rpc("determine_available_memory")',
            )
            + tb_frame(executor, 361, "collective_rpc", "return aggregate(get_response())", "get_response()")
            + tb_frame(executor, 344, "get_response", "raise RuntimeError(")
        )
    kv = vllm_src("v1/core/kv_cache_utils.py")
    return (
        frames
        + tb_frame(kv, 1338, "get_kv_cache_configs", "_check_enough_kv_cache_memory(", None)
        + tb_frame(kv, 701, "_check_enough_kv_cache_memory", "raise ValueError(")
    )


def worker_frames(stage):
    executor = vllm_src("v1/executor/multiproc_executor.py")
    worker = vllm_src("v1/worker/gpu_worker.py")
    runner = vllm_src("v1/worker/gpu_model_runner.py")
    if stage == "busy":
        return (
            tb_frame(
                executor, 743, "worker_main", "worker = WorkerProc(*args, **kwargs)", "WorkerProc(*args, **kwargs)"
            )
            + tb_frame(executor, 562, "__init__", "self.worker.init_device()")
            + tb_frame(
                vllm_src("v1/worker/worker_base.py"), 326, "init_device", "self.worker.init_device()  # type: ignore"
            )
            + tb_frame(worker, 262, "init_device", "raise ValueError(")
        )
    if stage == "load":
        return (
            tb_frame(
                executor, 743, "worker_main", "worker = WorkerProc(*args, **kwargs)", "WorkerProc(*args, **kwargs)"
            )
            + tb_frame(executor, 571, "__init__", "self.worker.load_model()")
            + tb_frame(worker, 289, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)")
            + tb_frame(runner, 3343, "load_model", "self.model = model_loader.load_model(", "model_loader.load_model(")
            + tb_frame(
                vllm_src("model_executor/model_loader/base_loader.py"),
                55,
                "load_model",
                "self.load_weights(model, model_config)",
            )
            + tb_frame(
                vllm_src("model_executor/model_loader/default_loader.py"),
                305,
                "load_weights",
                "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
                "model.load_weights(self.get_all_weights(model_config, model))",
            )
            + tb_frame(
                SITE + "/torch/utils/_device.py",
                104,
                "__torch_function__",
                "return func(*args, **kwargs)",
                "func(*args, **kwargs)",
            )
        )
    if stage == "profile":
        return (
            tb_frame(executor, 817, "worker_busy_loop", "output = func(*args, **kwargs)", "func(*args, **kwargs)")
            + tb_frame(worker, 331, "determine_available_memory", "self.model_runner.profile_run()")
            + tb_frame(
                runner, 4112, "profile_run", "hidden_states, last_hidden_states = self._dummy_run(", "self._dummy_run("
            )
            + tb_frame(runner, 3891, "_dummy_run", "outputs = self.model(", "self.model(")
            + tb_frame(
                SITE + "/torch/nn/modules/module.py",
                1784,
                "_call_impl",
                "return forward_call(*args, **kwargs)",
                "forward_call(*args, **kwargs)",
            )
        )
    return (
        tb_frame(executor, 817, "worker_busy_loop", "output = func(*args, **kwargs)", "func(*args, **kwargs)")
        + tb_frame(
            worker,
            612,
            "execute_model",
            "output = self.model_runner.execute_model(",
            "self.model_runner.execute_model(",
        )
        + tb_frame(runner, 2875, "execute_model", "model_output = self._model_forward(", "self._model_forward(")
        + tb_frame(SITE + "/torch/cuda/graphs.py", 86, "replay", "super().replay()")
    )
