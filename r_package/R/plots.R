# ggplot2 plots and broom-style summaries of results (ggplot2 and generics are suggested: the methods are
# registered when those packages are loaded).

#' @importFrom rlang .data
NULL

#' Plots of validation and of shares, with ggplot2
#'
#' `autoplot()` of a validation ([validate_labels()]) draws its reliability
#' diagram (`type = "reliability"`: the share of correct labels against the
#' top probability, by bin, beside the diagonal of perfect calibration; it
#' needs the probabilities) or its confusion matrix (`type = "confusion"`).
#' `autoplot()` of [prevalence()]'s shares draws, per label (and group), the
#' share estimated three ways with its interval: the model's labels alone
#' (naive: its errors ignored), the coded texts alone, and PPI++ from both.
#' `autoplot()` of [regression()]'s coefficients draws each term's estimate
#' from the coded texts alone and from PPI++, with their intervals, beside
#' zero.
#'
#' @param object A validation from [validate_labels()], shares from
#'   [prevalence()], or coefficients from [regression()].
#' @param type `"reliability"` or `"confusion"`.
#' @param ... Unused.
#' @return A ggplot object.
#' @examplesIf newrllama::newrllama_available() && requireNamespace("ggplot2", quietly = TRUE)
#' v <- validate_labels(c("a", "b", "a", "b"), c("a", "b", "b", "b"),
#'                      probs = rbind(c(a = 0.9, b = 0.1), c(a = 0.2, b = 0.8), c(a = 0.6, b = 0.4),
#'                                    c(a = 0.3, b = 0.7)))
#' ggplot2::autoplot(v, type = "confusion")
#' @name newrllama_autoplot
NULL

#' @rdname newrllama_autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.newrllama_validation <- function(object, type = c("reliability", "confusion"), ...) {
  type <- match.arg(type)
  if (type == "confusion") {
    cells <- as.data.frame(object$confusion, stringsAsFactors = FALSE)
    return(ggplot2::ggplot(cells, ggplot2::aes(x = .data$predicted, y = .data$truth, fill = .data$Freq)) +
             ggplot2::geom_tile() + ggplot2::geom_text(ggplot2::aes(label = .data$Freq)) +
             ggplot2::scale_fill_gradient(low = "white", high = "steelblue") +
             ggplot2::labs(x = "label given", y = "human code", fill = "texts",
                           title = sprintf("Confusion (accuracy %.3f, kappa %.3f, n = %d)", object$accuracy,
                                           object$kappa, object$n)))
  }
  if (nrow(object$reliability) == 0) {
    abort_invalid("a reliability plot needs the probabilities: validate_labels(predicted, truth, probs = ...)")
  }
  ggplot2::ggplot(object$reliability, ggplot2::aes(x = .data$confidence, y = .data$accuracy)) +
    ggplot2::geom_abline(linetype = 2, colour = "grey50") + ggplot2::geom_line() +
    ggplot2::geom_point(ggplot2::aes(size = .data$n)) +
    ggplot2::coord_equal(xlim = c(0, 1), ylim = c(0, 1)) +
    ggplot2::labs(x = "top probability", y = "share correct", size = "texts",
                  title = sprintf("Reliability (ECE %.3f, n = %d)", object$ece, object$n))
}

#' @rdname newrllama_autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.newrllama_prevalence <- function(object, ...) {
  shares <- as.data.frame(object)
  shares <- shares[shares$estimand == "share", , drop = FALSE]
  way <- function(name, estimate, low, high) {
    data.frame(label = shares$label, group = if (is.null(shares$group)) NA else shares$group, way = name,
               estimate = shares[[estimate]], low = shares[[low]], high = shares[[high]])
  }
  ways <- c("model's labels (naive)", "coded texts only", "PPI++")
  long <- rbind(way(ways[1], "naive", "naive.low", "naive.high"),
                way(ways[2], "classical", "classical.conf.low", "classical.conf.high"),
                way(ways[3], "estimate", "conf.low", "conf.high"))
  long$way <- factor(long$way, levels = ways)
  plot <- ggplot2::ggplot(long, ggplot2::aes(x = .data$estimate, y = .data$label, xmin = .data$low,
                                             xmax = .data$high, colour = .data$way)) +
    ggplot2::geom_pointrange(position = ggplot2::position_dodge(width = 0.6)) +
    ggplot2::labs(x = "share", y = NULL, colour = NULL)
  if (!all(is.na(long$group))) plot <- plot + ggplot2::facet_wrap(ggplot2::vars(.data$group))
  plot
}

#' @rdname newrllama_autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.newrllama_regression <- function(object, ...) {
  ways <- c("coded texts only", "PPI++")
  long <- rbind(
    data.frame(term = object$term, way = ways[1], estimate = object$classical, low = object$classical.conf.low,
               high = object$classical.conf.high),
    data.frame(term = object$term, way = ways[2], estimate = object$estimate, low = object$conf.low,
               high = object$conf.high))
  long$way <- factor(long$way, levels = ways)
  long$term <- factor(long$term, levels = rev(unique(object$term)))
  ggplot2::ggplot(long, ggplot2::aes(x = .data$estimate, y = .data$term, xmin = .data$low, xmax = .data$high,
                                     colour = .data$way)) +
    ggplot2::geom_vline(xintercept = 0, linetype = 2, colour = "grey50") +
    ggplot2::geom_pointrange(position = ggplot2::position_dodge(width = 0.6)) +
    ggplot2::labs(x = "coefficient", y = NULL, colour = NULL,
                  title = sprintf("%d coded texts of %d", object$n_coded[[1]], object$n[[1]]))
}

#' Validation and calibration as one-row and per-label tibbles
#'
#' `glance()` gives a validation's or a calibration's figures as one row;
#' `tidy()` a validation's per-label precision, recall and F1 (the generics
#' package's verbs, as broom uses them).
#'
#' @param x A validation from [validate_labels()] or a calibration from
#'   [calibrate_labels()].
#' @param ... Unused.
#' @return A tibble.
#' @examplesIf newrllama::newrllama_available() && requireNamespace("generics", quietly = TRUE)
#' v <- validate_labels(c("a", "b", "a"), c("a", "b", "b"))
#' generics::glance(v)
#' generics::tidy(v)
#' @name newrllama_tidiers
NULL

#' @rdname newrllama_tidiers
#' @exportS3Method generics::tidy
tidy.newrllama_validation <- function(x, ...) {
  x$per_label
}

#' @rdname newrllama_tidiers
#' @exportS3Method generics::glance
glance.newrllama_validation <- function(x, ...) {
  tibble::tibble(accuracy = x$accuracy, accuracy.low = x$accuracy_ci[1], accuracy.high = x$accuracy_ci[2],
                 kappa = x$kappa, kappa.low = x$kappa_ci[1], kappa.high = x$kappa_ci[2], macro_f1 = x$macro_f1,
                 brier = x$brier, ece = x$ece, order_flip_share = x$order_flip_share, n = x$n,
                 n_missing = x$n_missing)
}

#' @rdname newrllama_tidiers
#' @exportS3Method generics::glance
glance.newrllama_calibration <- function(x, ...) {
  tibble::tibble(calibrated = isTRUE(x$calibrated), criterion = x$criterion, n = x$n, cv_accuracy = x$cv_accuracy,
                 cv_kappa = x$cv_kappa, scale = x$scale, penalty = x$penalty, balanced = isTRUE(x$balanced))
}
