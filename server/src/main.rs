//! The `holdpoint` binary: all the work is in the library, so tests can drive the same code.

fn main() -> std::process::ExitCode {
    holdpoint::cli::main()
}
