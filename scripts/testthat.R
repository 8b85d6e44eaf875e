# Runs r_package's testthat suite from the repository root (scripts/test.sh calls it in both lanes): a summary,
# and a JUnit file of each test's time in $NEWRLLAMA_TEST_REPORTS when set (scripts/profile_tests.py reads it).
# NEWRLLAMA_TEST_LANE=fast skips the tests that start processes or servers (skip_on_fast_lane()).
reports <- Sys.getenv("NEWRLLAMA_TEST_REPORTS")
reporter <- if (nzchar(reports)) {
  testthat::MultiReporter$new(list(testthat::SummaryReporter$new(),
                                   testthat::JunitReporter$new(file = file.path(reports, "testthat.xml"))))
} else {
  "summary"
}
testthat::test_local("r_package", reporter = reporter, stop_on_failure = TRUE)
