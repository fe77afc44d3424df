// libcudnn loaded at run time: cudnn_loader.cpp defines the cuDNN C functions the cuDNN
// frontend calls, each forwarding to the symbol of a libcudnn opened with dlopen on first
// use, so that attntune links no cuDNN library and runs where none is installed.
// Where it looks, in order: $ATTNTUNE_CUDNN_LIBRARY (a file), libcudnn.so.9 on the
// loader's path, the libcudnn found at configure time (ATTNTUNE_CUDNN_BUILD_LIBRARY).
#pragma once

#include <string>

namespace attntune {
namespace cudnn_loader {

/// "" when libcudnn is loaded (the first call tries, once per process), else why not, in
/// one line: "cudnn: libcudnn.so.9 not found (<where it looked and dlopen's message>)".
std::string LoadError();

}  // namespace cudnn_loader
}  // namespace attntune
