//! The hybrid-drill binary: parse arguments, run the command, exit with its code.

fn main() -> std::process::ExitCode {
    hybrid_drill::cli::main()
}
