// Whether a tier may be written: the one setting every tier type shares with shards.yaml's `read_only`.
#pragma once

namespace datavo {

// A read-only tier serves hits and is never written to or evicted from.
enum class Access { read_write, read_only };

}  // namespace datavo
