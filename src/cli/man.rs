//! The manual pages: clap_mangen's sections for the program and each command, with an EXIT STATUS section from the
//! one exit-code table.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use super::args::Cli;
use super::failure::{Failure, Outcome};
use crate::exit::{self, EXIT_PASSED};

/// The manual page on stdout, or every page (one per command) written into `dir`.
pub(super) fn man_command(dir: Option<&Path>) -> Outcome {
    let written = match dir {
        None => render(Cli::command(), None, &mut std::io::stdout()),
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| write_all(dir)),
    };
    written.map_err(|e| Failure::invalid(format!("cannot write the manual page: {e}")))?;
    Ok(EXIT_PASSED)
}

/// hybrid-drill.1 and hybrid-drill-COMMAND.1 for each command, as clap_mangen's `generate_to` names them.
fn write_all(dir: &Path) -> std::io::Result<()> {
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    for command in cli.get_subcommands().filter(|c| !c.is_hide_set()).cloned() {
        let name = command.get_name().to_string();
        let page = Man::new(command.clone());
        let mut file = std::fs::File::create(dir.join(page.get_filename()))?;
        render(command, Some(&name), &mut file)?;
    }
    let page = Man::new(cli.clone());
    let mut file = std::fs::File::create(dir.join(page.get_filename()))?;
    render(cli, None, &mut file)
}

/// One page: clap_mangen's sections in its order, EXIT STATUS before the version.
fn render(command: clap::Command, name: Option<&str>, out: &mut dyn Write) -> std::io::Result<()> {
    let page = Man::new(command.clone());
    page.render_title(out)?;
    page.render_name_section(out)?;
    page.render_synopsis_section(out)?;
    page.render_description_section(out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        page.render_options_section(out)?;
    }
    if command.has_subcommands() {
        page.render_subcommands_section(out)?;
    }
    if command.get_after_help().is_some() || command.get_after_long_help().is_some() {
        page.render_extra_section(out)?;
    }
    exit_status(name).to_writer(out)?;
    if command.get_version().is_some() || command.get_long_version().is_some() {
        page.render_version_section(out)?;
    }
    Ok(())
}

/// The EXIT STATUS section: the codes `command` (or any command) may exit with.
fn exit_status(command: Option<&str>) -> Roff {
    let mut roff = Roff::default();
    roff.control("SH", ["EXIT STATUS"]);
    for row in exit::rows_of(command) {
        roff.control("TP", [] as [&str; 0]);
        roff.text([bold(row.code.to_string())]);
        roff.text([roman(row.meaning)]);
    }
    roff
}
