use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match mcpfast_load::cli::parse(&args) {
        Ok(Some(opts)) => mcpfast_load::run(opts),
        Ok(None) => {
            let _ = std::io::stdout().write_all(mcpfast_load::cli::USAGE.as_bytes());
            0
        }
        Err(e) => {
            eprintln!("mcpfast-load: {e}\n\n{}", mcpfast_load::cli::USAGE);
            2
        }
    };
    std::process::exit(code);
}
