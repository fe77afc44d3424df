#include "cli/progress.h"

#include <unistd.h>

#include <string>

namespace attntune {

ProgressPrinter::ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}

void ProgressPrinter::operator()(const ProgressEvent& ev) {
  if (ev.status == "lost") {  // a rank is gone: a line of its own, kept on a terminal too
    Finish();
    std::string text = "attntune: " + ev.message;
    if (!ev.problem.empty())
      text += "; its candidate (" + ev.problem + " " + ev.config + ") goes to another rank";
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
    return;
  }
  if (ev.status == "running" && !tty_) return;  // plain logs get one line per result
  char line[256];
  char eval[48] = "";  // the counter passes come after the search: no evaluation index
  if (ev.eval_index > 0 && ev.budget > 0) {
    std::snprintf(eval, sizeof eval, "eval %lld/%lld  ", static_cast<long long>(ev.eval_index),
                  static_cast<long long>(ev.budget));
  } else if (ev.eval_index > 0) {  // a time budget alone: no count to reach
    std::snprintf(eval, sizeof eval, "eval %lld  ", static_cast<long long>(ev.eval_index));
  }
  std::snprintf(line, sizeof line, "[%lld/%lld] %-16s %s%-28s %s",
                static_cast<long long>(ev.problem_index), static_cast<long long>(ev.problem_count),
                ev.problem.c_str(), eval, ev.config.c_str(), ev.status.c_str());
  std::string text = line;
  if (ev.status == "ok") {
    char t[64];
    std::snprintf(t, sizeof t, " %.3f ms", ev.median_ms);
    text += t;
  }
  if (ev.reused) text += " (stored)";
  if (!ev.message.empty()) text += ": " + ev.message;
  if (!ev.worker.empty()) text += " [" + ev.worker + "]";
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    pending_ = true;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}
void ProgressPrinter::Finish() {
  if (pending_) std::fputc('\n', stderr);
  pending_ = false;
}


}  // namespace attntune
