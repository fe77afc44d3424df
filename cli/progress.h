// Progress of a tune on stderr: one rewritten line on a terminal, plain lines otherwise.
#pragma once

#include <cstdio>

#include "tuner/session.h"

namespace attntune {

class ProgressPrinter {
 public:
  ProgressPrinter();
  ~ProgressPrinter() { Finish(); }
  void operator()(const ProgressEvent& ev);
  void Finish();

 private:
  bool tty_;
  bool pending_ = false;
};

}  // namespace attntune
