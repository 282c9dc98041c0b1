//! The `holdpoint` binary: all the work is in the library, so tests can drive the same code.

/// mimalloc's thread-local heaps: a HITL cycle allocates and frees on the runtime's and SQLite's threads at once,
/// and glibc's allocator made them wait on each other (`_int_malloc`, `_int_free`, `malloc_consolidate` under load;
/// docs/decisions.md, "The allocator", has the design and docs/benchmarks.md the measurements).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    holdpoint::cli::main()
}
