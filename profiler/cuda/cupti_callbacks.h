// The CUPTI buffer callbacks exactly as registered with cuptiActivityRegisterCallbacks,
// exposed so tests can drive the real completion path with fabricated records.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace attntune {

/// Hands CUPTI an 8-byte-aligned buffer of kCuptiBufferBytes.
void CUPTIAPI CuptiBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
/// Decodes every record of `buffer` into CuptiLedger(), adds CUPTI's dropped count for
/// (context, stream), and frees the buffer.
void CUPTIAPI CuptiBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                   size_t size, size_t valid_size);

/// Where the completion callback reads the dropped-record count (tests substitute a
/// fake: a real CUPTI without a device always reports 0).
using DroppedCountFn = CUptiResult (*)(CUcontext, uint32_t, size_t*);
void SetDroppedCountFnForTesting(DroppedCountFn fn);

}  // namespace attntune
