# -*- Python -*-
# lit configuration for the tfm compiler tests.

import glob
import os
import platform
import subprocess
import sys

import lit.formats
import lit.util
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "TFM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".tfm", ".test", ".c"]
config.excludes = ["Inputs", "node_modules", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "mlir-input.test.mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tfm_obj_root, "test")

# A test that hangs fails after ten minutes, named, instead of stalling the
# whole run (lit kills it with its children; that needs psutil, which the
# README's install line brings as python3-psutil). The slowest test takes
# about two minutes on 2 cores.
try:
    import psutil  # noqa: F401
except ImportError:
    lit_config.fatal("lit's per-test timeout needs the Python module psutil: "
                     "apt-get install python3-psutil")
if not lit_config.maxIndividualTestTime:
    lit_config.maxIndividualTestTime = 600

config.substitutions.append(("%tfm_src", config.tfm_src_root))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%models", os.path.join(config.tfm_src_root, "models")))
# Where the tfm-docs target writes docs/Dialect.md and docs/Passes.md
# (test/dialect/docs-current.test compares them with the committed ones).
config.substitutions.append(("%tfm_gen_docs", os.path.join(config.tfm_obj_root, "docs")))

# Compiling and linking C programs against a tfm object and the runtime.
config.substitutions.append(("%cc", config.c_compiler))
config.substitutions.append(("%tfm_cflags", "-I" + config.tfm_runtime_include))
config.substitutions.append(("%tfm_libs", " ".join([
    config.tfm_lib_dir + "/libtfm_runtime.a", config.jansson_static,
    "-L" + config.omp_dir, "-lomp", "-Wl,-rpath," + config.omp_dir, "-lm"])))
config.substitutions.append(("%tfm_lib_dir", config.tfm_lib_dir))

# Installing this build (test/e2e/install.test): the build tree, and cmake
# with this build's generator, for `cmake --install %tfm_obj_root` and a
# small project using the installed package; pkg-config.
config.substitutions.append(("%tfm_obj_root", config.tfm_obj_root))
config.substitutions.append(("%cmake_configure", '"%s" -G "%s" -DCMAKE_MAKE_PROGRAM="%s" -DCMAKE_C_COMPILER="%s"' % (
    config.cmake, config.cmake_generator, config.cmake_make_program, config.c_compiler)))
config.substitutions.append(("%cmake", '"%s"' % config.cmake))
config.substitutions.append(("%pkg_config", config.pkg_config or "pkg-config"))

# A memory limit for a test's process: `ulimit -v N` (KiB), except under
# AddressSanitizer (-DTFM_SANITIZE=ON), which reserves terabytes of address
# space for its shadow memory and cannot start under `ulimit -v`: there
# ASan's own allocator refuses any allocation above 1000 MB instead (":"
# takes the N).
if str(getattr(config, "tfm_sanitize", "")).upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asan")
    config.substitutions.append(("%ulimit_v", "export ASAN_OPTIONS=$ASAN_OPTIONS:"
                                 "allocator_may_return_null=1:max_allocation_size_mb=1000; :"))
else:
    config.substitutions.append(("%ulimit_v", "ulimit -v"))

# The host CPU's AVX512_VNNI (/proc/cpuinfo): tests of a native build's
# vpdpbusd paths against a build that does not use them.
try:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                if "avx512_vnni" in line.split():
                    config.available_features.add("avx512vnni")
                break
except OSError:
    pass

# TFMC_CACHE_LOG: where test/tfmc-cache.py logs its hits and misses, if set.
llvm_config.with_system_environment(["HOME", "TMPDIR", "TFMC_CACHE_LOG"])

# `lit --param long=1`: the long runs of test/long (CI's sanitizer job runs
# them; the README's test command leaves them out).
if lit.util.pythonize_bool(lit_config.params.get("long", False)):
    config.available_features.add("long")
llvm_config.use_default_substitutions()

tool_dirs = [config.tfm_tools_dir, config.llvm_tools_dir]
# tfmc through test/tfmc-cache.py: the tests that build the same artifact
# (the same model, options and tfmc) share one build, which stays valid in
# later runs until tfmc, a library it depends on or the host changes.
tfmc_real = os.path.join(config.tfm_tools_dir, "tfmc")
config.environment["TFMC_REAL"] = tfmc_real
config.environment["TFMC_CACHE_DIR"] = os.path.join(config.tfm_obj_root, "test", "tfmc-cache")
# What a build depends on besides tfmc: the runtime libraries it links, and
# those of the system that make its code or link it (LLVM and MLIR, which a
# package upgrade replaces without a rebuild of tfmc, and the C compiler).
config.environment["TFMC_CACHE_DEPS"] = " ".join(
    [os.path.join(config.tfm_lib_dir, f)
     for f in (sorted(os.listdir(config.tfm_lib_dir)) if os.path.isdir(config.tfm_lib_dir) else [])
     if f.endswith((".a", ".o", ".so"))] +
    sorted(p for lib in ("libLLVM.so.*", "libMLIR.so.*")
           for p in glob.glob(os.path.join(config.llvm_tools_dir, "..", "lib", lib))) +
    [config.c_compiler])
# --cpu=native compiles for the host: its CPU is part of every key.
try:
    with open("/proc/cpuinfo") as f:
        cpu = [l for l in f if l.startswith(("model name", "flags"))][:2]
    config.environment["TFMC_CACHE_HOST"] = " ".join(" ".join(l.split()) for l in cpu)
except OSError:
    config.environment["TFMC_CACHE_HOST"] = platform.processor()
# NumPy's and PyTorch's OpenBLAS on one thread: its idle threads spin in
# sched_yield, and the suite's matrices are small (the tests' own programs
# do not use it).
config.environment["OPENBLAS_NUM_THREADS"] = "1"
# tfmc's own kernel cache (the kernels that depend on no model, such as the
# GGUF GEMM), shared by the suite's compiles and kept in the build tree
# rather than the user's ~/.cache/tfm; an entry is named by a hash of tfmc.
config.environment["TFM_CACHE_DIR"] = os.path.join(config.tfm_obj_root, "test", "kernel-cache")
tfmc_cached = os.path.join(config.tfm_src_root, "test", "tfmc-cache.py")
# A test of the compile itself (its time, its memory) runs tfmc uncached.
config.substitutions.append(("%tfmc_real", tfmc_real))
tools = ["tfm-opt", "split-file", "count", "not",
         ToolSubst("tfmc", command=tfmc_cached if os.path.exists(tfmc_real) else None,
                   unresolved="ignore"),
         ToolSubst("tfm-tokenize", unresolved="ignore"),
         ToolSubst("tfm-chat-template", unresolved="ignore")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# Installing (test/e2e/install.test) reads the run paths of an executable;
# the kernel cache (test/gguf/kernel-cache.test) the symbols of objects;
# the VNNI tests (test/long/gguf-vnni.test) the machine code of executables.
llvm_config.add_tool_substitutions(["llvm-readelf", "llvm-nm", "llvm-objdump"], [config.llvm_tools_dir])

# Tokenizer peers: Node with the npm packages of test/tokenizer/package.json,
# which `ctest` (fixture tfm-npm-peers) and `check-tfm` install into the
# build tree (BUILD/test/npm-peers/node_modules). Missing, the tokenizer tests
# fail with a message saying so (they are not skipped).
import shutil
node = shutil.which("node")
config.substitutions.append(("%node", node if node else
    "sh -c 'echo error: node is not installed: the tokenizer tests need Node >&2; exit 1' --"))
npm_modules = getattr(config, "tfm_npm_modules", "")
if not os.path.isdir(npm_modules):
    lit_config.note("the tokenizer tests' npm packages are not installed in %s: "
                    "run ctest (fixture tfm-npm-peers) or `cmake --build BUILD "
                    "--target tfm-npm-peers`; those tests fail" % npm_modules)
config.substitutions.append(("%npm_modules", npm_modules))

def python_modules(python, modules):
    """The modules of `modules` that `python` finds (importlib's find_spec:
    found, not imported, so that lit starts without importing PyTorch; an
    install that is found but broken fails in the tests that use it)."""
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.util as u, sys; "
             "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))"] + modules,
            check=True, capture_output=True, text=True, timeout=60).stdout
        return set(out.split())
    except Exception:
        return set()


# SentencePiece's own library for the tokenizer tests: Debian's
# python3-sentencepiece under /usr/bin/python3. Missing, those tests fail
# with a message saying so (they are not skipped).
spm_python = "/usr/bin/python3"
torch_python = getattr(config, "torch_python", "") or ""
if not os.path.exists(torch_python):
    torch_python = ""
# One query per interpreter: its modules of these peers.
wanted = {spm_python: ["sentencepiece", "jinja2"]}
if torch_python:
    wanted.setdefault(torch_python, []).extend(["torch", "numpy"])
found = {python: python_modules(python, modules) for python, modules in wanted.items()}
if "sentencepiece" in found[spm_python]:
    config.substitutions.append(("%spm_python", spm_python))
else:
    config.substitutions.append(("%spm_python",
        "sh -c 'echo error: /usr/bin/python3 lacks sentencepiece: apt-get install "
        "python3-sentencepiece >&2; exit 1' --"))

# The chat templates' peer: Debian's python3-jinja2 under /usr/bin/python3.
# Missing, the test/chat tests fail with a message saying so.
if "jinja2" in found[spm_python]:
    config.substitutions.append(("%jinja_python", spm_python))
else:
    config.substitutions.append(("%jinja_python",
        "sh -c 'echo error: /usr/bin/python3 lacks jinja2: apt-get install "
        "python3-jinja2 >&2; exit 1' --"))

# Peers: PyTorch 1.13 from Debian under /usr/bin/python3.
if torch_python:
    if {"torch", "numpy"} <= found[torch_python]:
        config.available_features.add("torch")
        config.substitutions.append(("%torch_python", torch_python))
    else:
        lit_config.note("PyTorch not found under %s: end-to-end parity tests are skipped" % torch_python)

# CUDA: ptxas assembles the PTX of the GPU tests where the toolkit is
# installed; a machine with a CUDA driver runs CUDA artifacts (gpu/driver.test,
# which runs them against a stub driver, needs one without).
ptxas = "/usr/local/cuda/bin/ptxas"
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    # The tests ask whether the PTX assembles for an architecture: -O0
    # checks the same instructions, types and resources in 40% of -O3's
    # time (tfmc's own fat binaries keep ptxas's default).
    config.substitutions.append(("%ptxas", ptxas + " -O0"))
else:
    lit_config.note("ptxas not found at %s: the PTX assembly tests are skipped" % ptxas)
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass

# Tensor parallelism: C programs linked with the runtime's MPI library run
# under mpirun (Open MPI). As root it needs the two ALLOW_RUN_AS_ROOT
# variables; on a small machine, oversubscription (more ranks than cores),
# shared memory without the cross-process copy that containers forbid, ranks
# that yield while they wait, and no network probing.
mpi_link = getattr(config, "tfm_mpi_link", "")
mpirun = getattr(config, "mpiexec", "") or shutil.which("mpirun") or ""
if mpi_link and mpirun and os.path.exists(mpirun):
    config.available_features.add("mpi")
    # As tfmc links an executable: tp_check.c's main calls tfm_main_step,
    # which the tokenizer library holds (its server renders chat templates).
    config.substitutions.append(("%tfm_mpi_libs", " ".join([
        config.tfm_lib_dir + "/libtfm_tokenizer.a", config.tfm_lib_dir + "/libtfm_chat.a",
        config.tfm_lib_dir + "/libtfm_runtime_mpi.a", config.tfm_lib_dir + "/libtfm_runtime.a",
        config.jansson_static, "-L" + config.omp_dir, "-lomp", "-Wl,-rpath," + config.omp_dir,
        "-lm", mpi_link])))
    config.substitutions.append(("%mpirun", mpirun + " --oversubscribe"))
    for name, value in [("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                        ("OMPI_MCA_btl", "self,vader"),
                        ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
                        ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                        # Waiting ranks yield their core (4 ranks on 2 cores
                        # spun: 1.8 s of CPU for a 12-token run, now 0.3 s).
                        ("OMPI_MCA_mpi_yield_when_idle", "1"),
                        ("PMIX_MCA_gds", "hash")]:
        config.environment[name] = value
else:
    lit_config.note("Open MPI or the runtime's MPI library not found: the tensor-parallel tests are skipped")
