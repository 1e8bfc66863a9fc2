//! Whether the line the cursor sits after asks for input (a prompt waits
//! for it).

/// Whether a line the cursor sits after asks for input.
pub fn is_prompt(line: &str) -> bool {
    let line = line.trim_end();
    if line.is_empty() {
        return false;
    }
    let lower = line.to_lowercase();
    let questions = ["[y/n]", "(y/n)", "[yes/no]", "(yes/no)", "[y/n/q]"];
    if questions
        .iter()
        .any(|q| lower.trim_end_matches([':', '?', ' ']).ends_with(q))
    {
        return true;
    }
    if lower.contains("password") || lower.contains("passphrase") {
        return lower.ends_with(':') || lower.ends_with('?');
    }
    // An interpreter's prompts are the whole row.
    if [">>>", "...", ">", "$", "#", "%", "?"].contains(&line) {
        return true;
    }
    // A debugger's: `(Pdb)`, `(gdb)`, `(lldb)`.
    if let Some(name) = line.strip_prefix('(').and_then(|l| l.strip_suffix(')'))
        && !name.is_empty()
        && name.len() <= 12
        && name.chars().all(char::is_alphanumeric)
    {
        return true;
    }
    // A question with its default answer after it: `package name: (app)`,
    // `Is this OK? (yes)`.
    let line = match line.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((question, default)) if !default.contains(['(', ')']) => question.trim_end(),
        _ => line,
    };
    let last = line.chars().last().unwrap_or(' ');
    match last {
        '?' | ':' => true,
        // `user@host:~$`, `root@box:/#`, `mysql>`, `In [3]:` (caught above).
        '$' | '#' | '>' => {
            line.len() > 1
                && !line.ends_with("->")
                && !line.ends_with(">>")
                && !line.ends_with("=>")
        }
        _ => false,
    }
}
