test_that("install_newrllama() needs a newrllama checkout as source", {
  expect_error(install_newrllama(source = ""), "NEWRLLAMA_SOURCE", class = "newrllama_invalid_argument")
  expect_error(install_newrllama(source = NA_character_), "source", class = "newrllama_invalid_argument")
  dir <- tempfile()
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  expect_error(install_newrllama(source = dir), "not a newrllama repository",
               class = "newrllama_invalid_argument")
  writeLines(c("[project]", "name = \"something-else\""), file.path(dir, "pyproject.toml"))
  expect_error(install_newrllama(source = dir), "not a newrllama repository",
               class = "newrllama_invalid_argument")
})

test_that("install_newrllama() checks the GPU flavour before doing anything", {
  expect_error(install_newrllama(source = "", gpu = "rocm"), "`gpu` must be one of",
               class = "newrllama_invalid_argument")
  expect_error(install_newrllama(source = "", gpu = c("cuda", "vulkan")), "`gpu`",
               class = "newrllama_invalid_argument")
  expect_error(install_newrllama(source = "", extras = "gpu"), "`extras`", class = "newrllama_invalid_argument")
})

test_that("install_newrllama() refuses Windows, where the shim cannot be built", {
  expect_error(newrllama:::check_supported_platform("windows"), "Linux and macOS only; Windows is not supported",
               class = "newrllama_install_error")
  expect_null(newrllama:::check_supported_platform("unix"))
})

test_that("the environment variable helper restores the old value", {
  Sys.unsetenv("NEWRLLAMA_TEST_VAR")
  seen <- newrllama:::with_env_var("NEWRLLAMA_TEST_VAR", "x", Sys.getenv("NEWRLLAMA_TEST_VAR"))
  expect_equal(seen, "x")
  expect_true(is.na(Sys.getenv("NEWRLLAMA_TEST_VAR", unset = NA)))
})

test_that("install_newrllama() installs a working Python side", {
  skip_if_not(identical(Sys.getenv("NEWRLLAMA_TEST_INSTALL"), "true"),
              "set NEWRLLAMA_TEST_INSTALL=true (and NEWRLLAMA_SOURCE) to test the installation")
  skip_if(!nzchar(Sys.getenv("NEWRLLAMA_SOURCE")), "NEWRLLAMA_SOURCE is not set")
  envname <- file.path(tempdir(), "r-newrllama-test")
  python <- install_newrllama(envname = envname)
  expect_true(file.exists(python))
  # The new environment decodes (its llama-cpp-python is the AMX-safe build and the shim links it)
  # and has the server and cluster extras.
  code <- paste(
    "import newrllama, ray, fastapi, uvicorn",
    "c = newrllama.generate_parallel([%s], max_tokens=4)[0]",
    "print(newrllama.__version__, c.finish_reason, repr(c.text))",
    sep = "; "
  )
  # Without R's LD_LIBRARY_PATH, which would give this Python the system's libpython (no working ssl).
  out <- system2("env", c("-u", "LD_LIBRARY_PATH", shQuote(python), "-c",
                          shQuote(sprintf(code, deparse(capital_prompt())))), stdout = TRUE)
  expect_match(paste(out, collapse = " "), "^[0-9.]+ length .*Paris")
  # The environment records its build, for this CPU: the check the next setup runs passes.
  script <- file.path(Sys.getenv("NEWRLLAMA_SOURCE"), "scripts", "build_llama_cpp.py")
  status <- system2("env", c("-u", "LD_LIBRARY_PATH", shQuote(python), shQuote(script), "--python", shQuote(python),
                             "--check"))
  expect_equal(status, 0L)
})
