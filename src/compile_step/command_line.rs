//! [`CompileOptions`] as the `hlatc compile` command line that builds
//! them: what the planner prints for each layout and what the memory fit
//! suggests, written from the options themselves rather than spelled by
//! hand beside them. Every option that differs from its default is
//! written, in the order of [`super::spellings::SPELLINGS`], so the same
//! options always give the same words; `tests/it/option_surfaces.rs` holds
//! the list to every spelled option, and `hlatc compile` of the words to
//! the library's own bundle of the options.

pub use super::option_codec::Unspellable;
use super::spellings::CompileOption;
use super::{CompileOptions, ModelSource, OptionError};

impl CompileOptions {
    /// One occurrence of `option` given: its word (`None` for a switch)
    /// read into its field, or refused naming it. A repeated option adds
    /// to what is there; any other replaces it.
    pub fn set(&mut self, option: CompileOption, word: Option<&str>) -> Result<(), OptionError> {
        option
            .read(self, word)
            .map_err(|e| OptionError::new(option, word.unwrap_or_default(), e.to_string()))
    }

    /// The options set to other than their defaults, in the order of
    /// [`super::spellings::SPELLINGS`]: what [`CompileOptions::set`] of
    /// each makes these options again from the defaults.
    pub fn settings(&self) -> Result<Vec<Setting>, Unspellable> {
        let defaults = CompileOptions::default();
        let mut out = Vec::new();
        for &option in CompileOption::ALL {
            for value in option.write(self, &defaults)? {
                out.push(Setting { option, value });
            }
        }
        Ok(out)
    }

    /// The arguments after `hlatc compile` (without `--out`) that build
    /// these options.
    pub fn command_line(&self) -> Result<Vec<String>, Unspellable> {
        Ok(self.settings()?.iter().flat_map(Setting::words).collect())
    }

    /// The settings that turn `from` into these options, as a user would
    /// add them to `from`'s command (`--zero1 --remat full-layer`): every
    /// setting of these options that `from`'s lacks or gives another
    /// value. The model is not compared (a change of layout keeps it, and
    /// a model given as JSON has no words).
    pub fn change_from(&self, from: &CompileOptions) -> OptionChange {
        let settings = |o: &CompileOptions| {
            let o = CompileOptions {
                model: ModelSource::Preset(String::new()),
                ..o.clone()
            };
            o.settings().unwrap_or_default()
        };
        let (now, before) = (settings(self), settings(from));
        OptionChange(now.into_iter().filter(|s| !before.contains(s)).collect())
    }

    /// [`CompileOptions::command_line`] as one line, each word quoted
    /// where a shell would split or expand it.
    pub fn command_line_text(&self) -> Result<String, Unspellable> {
        Ok(self
            .command_line()?
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// One option set, with its value (`None` for a switch turned on), as
/// [`CompileOptions::settings`] writes it (the option table makes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub option: CompileOption,
    pub value: Option<String>,
}

impl Setting {
    /// As `hlatc compile` takes it: `--tp`, `2`.
    fn words(&self) -> Vec<String> {
        let mut words = vec![self.option.flag()];
        words.extend(self.value.clone());
        words
    }

    /// As `hlatc.compile_step` takes it: `tp=2`, `zero1=True`,
    /// `remat='full-layer'`.
    fn keyword(&self) -> String {
        let value = match &self.value {
            None => "True".to_string(),
            Some(v) if v.parse::<f64>().is_ok() => v.clone(),
            Some(v) => format!("{v:?}"),
        };
        format!("{}={value}", self.option.keyword())
    }
}

/// Settings that change one compile into another.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionChange(pub Vec<Setting>);

impl OptionChange {
    /// As flags added to a command: `--remat full-layer --zero1`.
    pub fn flags(&self) -> String {
        let words: Vec<String> = self.0.iter().flat_map(Setting::words).collect();
        words
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// As keywords added to a call: `remat='full-layer', zero1=True`.
    pub fn keywords(&self) -> String {
        self.0
            .iter()
            .map(Setting::keyword)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `w` as a shell reads it back: bare when it is made of characters no
/// shell treats specially, else in single quotes.
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+@%".contains(c));
    match plain {
        true => w.to_string(),
        false => format!("'{}'", w.replace('\'', r"'\''")),
    }
}
