# Attaching newrllama beside the packages its users attach with it must not hide a function of theirs,
# in either order: no exported name may be one of theirs.
test_that("no exported name is also exported by ggplot2, shiny, dplyr, generics, rms, stats or tibble", {
  ours <- getNamespaceExports("newrllama")
  for (package in c("ggplot2", "shiny", "dplyr", "generics", "rms", "stats", "tibble")) {
    expect_true(requireNamespace(package, quietly = TRUE), info = paste(package, "is needed by this test"))
    expect_equal(sort(intersect(ours, getNamespaceExports(package))), character(), info = package)
  }
})

test_that("the renamed verbs are the ones exported", {
  ours <- getNamespaceExports("newrllama")
  expect_true(all(c("llm_annotate", "llm_vec_annotate", "generate_text", "validate_labels",
                    "calibrate_labels") %in% ours))
  expect_false(any(c("annotate", "annotate_vec", "generate", "validate", "calibrate") %in% ours))
})
