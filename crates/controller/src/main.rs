//! `pom-manager`: the Platform Operators Manager. Everything lives in [`pom_controller::cli`] so
//! that the e2e suite runs the very same entry point as a process.

fn main() -> std::process::ExitCode {
    pom_controller::cli::main()
}
