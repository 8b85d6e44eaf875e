library(testthat)
library(newrllama)

test_check("newrllama")
