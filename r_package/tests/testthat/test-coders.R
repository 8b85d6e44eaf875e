# Several coders' sheets read back, their agreement, and one truth adjudicated from them.

skip_if_no_newrllama()

labels <- c("acquisition", "crude oil", "earnings")
texts <- c(s1 = "Texaco buys Getty.", s2 = "OPEC cuts output.", s3 = "IBM earns more.", s4 = "Oil falls.")

fill_sheet <- function(path, codes) {
  sheet <- utils::read.csv(path, colClasses = "character")
  sheet$code <- codes
  utils::write.csv(sheet, path, row.names = FALSE)
}

test_that("two coders' sheet comes back as codings, their agreement and an adjudicated truth", {
  path <- tempfile(fileext = ".csv")
  on.exit(unlink(path))
  write_coding_sheet(texts, c(1, 2, 4), path, coders = c("ana", "ben"))
  sheet <- utils::read.csv(path, colClasses = "character")
  expect_equal(sheet$coder, rep(c("ana", "ben"), each = 3))
  fill_sheet(path, c("acquisition", "crude oil", "crude oil", "acquisition", "crude oil", "earnings"))
  codings <- read_codings(path, texts, labels)
  expect_s3_class(codings, "newrllama_codings")
  expect_equal(codings$coders, c("ana", "ben"))
  expect_equal(codings$codes$ben, c("acquisition", "crude oil", NA, "earnings"))
  expect_output(print(codings), "2 coders of 4 texts")
  agreed <- coder_agreement(codings)
  expect_equal(agreed$label, c(NA, labels))
  expect_equal(agreed$n_units, rep(3L, 4))
  expect_equal(agreed$percent_agreement[[1]], 2 / 3)
  expect_error(read_coding_sheet(path, texts, labels), "read_codings", class = "newrllama_invalid_argument")
  settled <- adjudicate(codings, tiebreak = c(NA, NA, NA, "crude oil"))
  expect_equal(settled$truth, c(s1 = "acquisition", s2 = "crude oil", s3 = NA, s4 = "crude oil"))
  expect_output(print(settled), "1 disagreements \\(1 settled by the tiebreak, 0 left out\\)")
  expect_true(is.na(adjudicate(codings)$truth[["s4"]]))
  x <- data.frame(id = 1:4)
  x$.label <- c("acquisition", "crude oil", "earnings", "crude oil")
  x$.probs <- lapply(x$.label, function(l) stats::setNames((labels == l) * 0.7 + 0.1, labels))
  expect_match(methods_text(x, coding = settled), "coded by 2 coders \\(ana, ben\\); 3 of the 3 coded texts")
  expect_error(adjudicate(codings, rule = "loudest"), "should be one of")
  expect_error(adjudicate("codings"), "read_codings", class = "newrllama_invalid_argument")
})

test_that("one sheet per coder, the coder named by the file, and a workbook alike", {
  skip_if_not_installed("openxlsx")
  dir <- tempfile()
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  ana <- file.path(dir, "ana.csv")
  write_coding_sheet(texts, 1:4, ana)
  fill_sheet(ana, c("acquisition", "crude oil", "earnings", "crude oil"))
  cleo <- file.path(dir, "cleo.xlsx")
  write_coding_sheet(texts, 1:4, cleo)
  sheet <- openxlsx::read.xlsx(cleo)
  sheet$code <- c("acquisition", "crude oil", "earnings", "earnings")
  openxlsx::write.xlsx(sheet, cleo, overwrite = TRUE)
  codings <- read_codings(c(ana, cleo), texts, labels)
  expect_equal(codings$coders, c("ana", "cleo"))
  expect_equal(adjudicate(codings, "unanimous")$n_unresolved, 1L)
})
