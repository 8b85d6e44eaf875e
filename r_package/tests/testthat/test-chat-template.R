skip_if_no_newrllama()
model <- test_model()
messages <- list(
  list(role = "user", content = "What is the capital of France?"),
  list(role = "assistant", content = "Paris."),
  list(role = "user", content = "And of Italy?")
)

test_that("apply_chat_template() formats a list of messages", {
  prompt <- apply_chat_template(model, messages)
  expect_type(prompt, "character")
  expect_length(prompt, 1)
  expect_match(prompt, "What is the capital of France?", fixed = TRUE)
  expect_match(prompt, "And of Italy?", fixed = TRUE)
  # Gemma's template ends with the start of the model's turn.
  expect_match(prompt, "<start_of_turn>model\n$")
  without <- apply_chat_template(model, messages, add_assistant = FALSE)
  expect_false(grepl("<start_of_turn>model\n$", without))
})

test_that("a data frame gives the same prompt as a list", {
  df <- data.frame(role = vapply(messages, `[[`, "", "role"),
                   content = vapply(messages, `[[`, "", "content"))
  expect_equal(apply_chat_template(model, df), apply_chat_template(model, messages))
})

test_that("a single message and an explicit template work", {
  one <- list(list(role = "user", content = "Hi"))
  expect_match(apply_chat_template(model, one), "Hi")
  chatml <- apply_chat_template(model, one, template = "chatml")
  expect_match(chatml, "<|im_start|>user", fixed = TRUE)
})

test_that("apply_chat_template() checks its arguments", {
  expect_error(apply_chat_template(model, "hello"), "messages", class = "newrllama_invalid_argument")
  expect_error(apply_chat_template(model, list(list(role = "user"))), "messages\\[\\[1\\]\\]",
               class = "newrllama_invalid_argument")
  expect_error(apply_chat_template(model, list(list(role = "user", content = NA_character_))),
               "messages", class = "newrllama_invalid_argument")
  expect_error(apply_chat_template(model, data.frame(who = "user", text = "hi")),
               "columns", class = "newrllama_invalid_argument")
  expect_error(apply_chat_template(model, messages, template = 1), "template",
               class = "newrllama_invalid_argument")
  expect_error(apply_chat_template(model, messages, add_assistant = "yes"), "add_assistant",
               class = "newrllama_invalid_argument")
  expect_error(apply_chat_template("model", messages), "model", class = "newrllama_invalid_argument")
})
