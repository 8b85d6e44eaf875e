# R's generating functions take the sampling parameters with the defaults of the library's one table
# (newrllama.engine.sampling.sampling_table); ranges are Python's to check (R passes the values on).
skip_if_no_newrllama()

test_that("every generating function's sampling defaults are the table's", {
  table <- python_helpers()$sampling_defaults()
  for (f in list(generate_text, generate_parallel)) {
    defaults <- formals(f)[names(table)]
    expect_named(defaults, names(table))
    for (name in names(table)) {
      expect_equal(eval(defaults[[name]]), table[[name]], info = name)
    }
  }
})

test_that("a value outside the table's range is refused with Python's message", {
  ctx <- test_context(test_model())
  expect_error(generate_text(ctx, "x", seed = -2), "seed must be in \\[-1, 4294967295\\]",
               class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, "x", temperature = Inf), "temperature must be a finite number >= 0",
               class = "newrllama_invalid_argument")
})
