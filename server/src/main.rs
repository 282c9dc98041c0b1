//! The `holdpoint` binary: all the work is in the library, so tests can drive the same code.

/// glibc's allocator took about an eighth of the server's CPU in a HITL cycle under load (`perf`: `_int_malloc`,
/// `_int_free`, `malloc_consolidate` on the runtime's and SQLite's threads); with mimalloc's thread-local heaps a
/// cycle costs the server about 9 % less CPU (docs/benchmarks.md, 2026-11-25, third session).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    holdpoint::cli::main()
}
