#pragma once
// Where a load's weights come from: the model's file (read and
// deserialised) or a host copy of weights a load already read
// (host_copy_store.h). Load times are learned apart by it
// (placement_controller.h): a load from the file says nothing of one from
// a host copy.

namespace infergate {

enum class LoadSource { kFile, kHostCopy };

}  // namespace infergate
