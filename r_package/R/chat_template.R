#' Format chat messages with a chat template
#'
#' Formats a conversation as a prompt, with the model's own chat template or
#' with `template`.
#'
#' @param model A model from [model_load()].
#' @param messages The conversation: a list of `list(role = , content = )`
#'   elements, or a data frame with columns `role` and `content`.
#' @param template A chat template (a Jinja-style template string or the name
#'   of a llama.cpp built-in template), or `NULL` for the model's own.
#' @param add_assistant End with the start of an assistant turn, so that the
#'   model answers next.
#' @return A single string.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' messages <- list(
#'   list(role = "user", content = "What is the capital of France?")
#' )
#' cat(apply_chat_template(model, messages))
#' @export
apply_chat_template <- function(model, messages, template = NULL, add_assistant = TRUE) {
  check_model(model)
  messages <- check_messages(messages)
  if (!is.null(template)) {
    template <- check_string(template, "template")
  }
  add_assistant <- check_flag(add_assistant, "add_assistant")
  with_python(model$py$apply_chat_template(messages, add_assistant = add_assistant, template = template))
}

# Messages as an unnamed list of list(role =, content =), which reticulate
# passes as a Python list of dicts.
check_messages <- function(messages, call = sys.call(-1)) {
  if (is.data.frame(messages)) {
    if (!all(c("role", "content") %in% names(messages))) {
      abort_invalid("`messages` as a data frame must have columns `role` and `content`", call = call)
    }
    messages <- Map(function(role, content) list(role = role, content = content),
                    as.character(messages$role), as.character(messages$content))
  }
  if (!is.list(messages)) {
    abort_invalid(sprintf("`messages` must be a list of list(role =, content =) or a data frame, not %s",
                          describe(messages)), call = call)
  }
  messages <- unname(messages)
  for (i in seq_along(messages)) {
    m <- messages[[i]]
    ok <- is.list(m) && all(c("role", "content") %in% names(m)) &&
      is.character(m$role) && length(m$role) == 1 && !is.na(m$role) &&
      is.character(m$content) && length(m$content) == 1 && !is.na(m$content)
    if (!ok) {
      abort_invalid(sprintf("`messages[[%d]]` must be a list with single strings `role` and `content`", i),
                    call = call)
    }
    messages[[i]] <- list(role = check_utf8(m$role, sprintf("messages[[%d]]$role", i), call = call),
                          content = check_utf8(m$content, sprintf("messages[[%d]]$content", i), call = call))
  }
  messages
}
