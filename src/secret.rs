//! Secrets a host resolves for the specs it registers, and the redaction of their values from
//! everything that comes back from the sandbox.
//!
//! A spec's `env` or `headers` value `{"secret": "NAME"}` ([`crate::wire::SpecValue`]) is
//! resolved on the host: from what the host program gave the driver ([`Secrets::set`]), else
//! from the host process's environment; `{"secret": "NAME", "value": "..."}` (a binding's
//! secrets function resolved it) is used as given. The resolved spec travels to the gateway in a session
//! frame only. From then on every line the session channel delivers, and every one-shot
//! command's output, has each form of the value that [`Redactor`] knows replaced by
//! `[secret:NAME]` before it is parsed, so no result, log message, progress message, error or
//! audit record a client sees holds it.
//!
//! Forms covered, for each value: the text itself; as a JSON string writes it (escaped, and with
//! non-ASCII as `\uXXXX`); percent-encoded (upper- and lower-case hex); and base64 (standard
//! and URL-safe alphabets) at each of the three byte offsets the value can start at within the
//! encoded data, matched on the characters that depend on the value alone. A value split
//! between two channel reads is covered (lines are whole before redaction); a value split
//! between two separate messages (two progress notifications, each holding half) or
//! transformed otherwise (hex, reversed, compressed) is not.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

use crate::wire::spec::{MIN_SECRET_BYTES, SpecValue, check_secret_name};

/// The fewest base64 characters matched for one alignment of a value: shorter runs would
/// match unrelated encoded data too often.
const MIN_BASE64_CHARS: usize = 8;

/// What replaces a secret's value.
pub fn placeholder(name: &str) -> String {
    format!("[secret:{name}]")
}

/// Secret values given in a host's configuration (`"secrets": {NAME: VALUE}`); `Debug` shows
/// the names alone, and they are never serialized.
#[derive(Default, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SecretValues {
    /// The [`Secrets`] they give; the error names the first that is invalid.
    pub fn secrets(&self) -> Result<Secrets, crate::error::Error> {
        let mut s = Secrets::default();
        for (name, value) in &self.0 {
            s.set(name, value)
                .map_err(|e| crate::error::Error::invalid_argument(format!("secrets: {e}")))?;
        }
        Ok(s)
    }
}

/// The secrets a host has resolved, by name, and the redactor of their values.
#[derive(Default, Clone)]
pub struct Secrets {
    given: BTreeMap<String, String>,
    redactor: Redactor,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("given", &self.given.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// Gives the value of secret `name` (it wins over the host's environment).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        check_secret_name(name)?;
        check_value(name, value)?;
        self.given.insert(name.to_owned(), value.to_owned());
        Ok(())
    }

    /// The value of secret `name`: given, else the host's environment variable of that name.
    fn resolve(&self, name: &str) -> Result<String, String> {
        if let Some(v) = self.given.get(name) {
            return Ok(v.clone());
        }
        match std::env::var(name) {
            Ok(v) => {
                check_value(name, &v)?;
                Ok(v)
            }
            Err(std::env::VarError::NotPresent) => Err(format!(
                "secret {name:?} is not set on the host: neither given to the host driver nor in its environment"
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "secret {name:?} in the host's environment is not UTF-8"
            )),
        }
    }

    /// Resolves every `{"secret": NAME}` of a spec's `mcp_config.env` and `mcp_config.headers`
    /// in place (adding its `value`) and has the redactor cover each value. Returns whether the
    /// spec names any secret; the error names the secret that cannot be resolved.
    pub fn resolve_spec(&mut self, spec: &mut serde_json::Value) -> Result<bool, String> {
        let mut found = false;
        let Some(config) = spec.get_mut("mcp_config").and_then(|c| c.as_object_mut()) else {
            return Ok(false);
        };
        for field in ["env", "headers"] {
            let Some(map) = config.get_mut(field).and_then(|m| m.as_object_mut()) else {
                continue;
            };
            for (key, value) in map.iter_mut() {
                if !value.is_object() {
                    continue;
                }
                let parsed: SpecValue = serde_json::from_value(value.clone())
                    .map_err(|e| format!("mcp_config.{field}.{key}: {e}"))?;
                let SpecValue::Secret(secret) = parsed else {
                    continue;
                };
                // A value given with the name (a binding's secrets function resolved it) is
                // used as it is; else the host resolves the name.
                let resolved = match secret.value {
                    Some(v) => check_value(&secret.secret, &v).map(|()| v),
                    None => self.resolve(&secret.secret),
                }
                .map_err(|e| format!("mcp_config.{field}.{key}: {e}"))?;
                self.redactor.cover(&secret.secret, &resolved);
                *value = serde_json::json!({"secret": secret.secret, "value": resolved});
                found = true;
            }
        }
        Ok(found)
    }

    /// The redactor of every value resolved so far.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

fn check_value(name: &str, value: &str) -> Result<(), String> {
    if value.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "secret {name:?} is shorter than {MIN_SECRET_BYTES} bytes: too short to be redacted reliably"
        ));
    }
    Ok(())
}

/// Replaces the known forms of secret values with `[secret:NAME]`.
#[derive(Default, Clone)]
pub struct Redactor {
    /// Each form, longest first (so a form is replaced before a shorter one inside it), with
    /// its placeholder.
    forms: Vec<(Vec<u8>, Vec<u8>)>,
    /// The distinct first bytes of the forms, for a quick scan.
    firsts: Vec<u8>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} forms)", self.forms.len())
    }
}

impl Redactor {
    /// Whether no value is covered.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Covers every form of `value` under `name`.
    pub fn cover(&mut self, name: &str, value: &str) {
        let mark = placeholder(name).into_bytes();
        let mut add = |form: Vec<u8>| {
            if !form.is_empty() && !self.forms.iter().any(|(f, _)| *f == form) {
                self.forms.push((form, mark.clone()));
            }
        };
        add(value.as_bytes().to_vec());
        let json = serde_json::to_string(value).unwrap_or_default();
        add(json.as_bytes()[1..json.len() - 1].to_vec());
        add(ascii_json(value).into_bytes());
        for upper in [true, false] {
            add(percent(value, upper).into_bytes());
        }
        for offset in 0..3 {
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                if let Some(core) = base64_core(engine, value.as_bytes(), offset) {
                    add(core.into_bytes());
                }
            }
        }
        self.forms.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        self.firsts = self.forms.iter().map(|(f, _)| f[0]).collect();
        self.firsts.sort_unstable();
        self.firsts.dedup();
    }

    /// `bytes` with every covered form replaced; borrowed when none occurs.
    pub fn redact<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if self.forms.is_empty() || !bytes.iter().any(|b| self.firsts.contains(b)) {
            return Cow::Borrowed(bytes);
        }
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(bytes);
        for (form, mark) in &self.forms {
            if let Some(replaced) = replace_all(&out, form, mark) {
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    /// Redacts `text` where it is, allocating only when something is replaced.
    pub fn redact_in_place(&self, text: &mut String) {
        if let Cow::Owned(o) = self.redact_str(text) {
            *text = o;
        }
    }

    /// Redacts `bytes` where they are, allocating only when something is replaced.
    pub fn redact_bytes_in_place(&self, bytes: &mut Vec<u8>) {
        if let Cow::Owned(o) = self.redact(bytes) {
            *bytes = o;
        }
    }

    /// [`Redactor::redact`] of text.
    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.redact(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Forms and placeholders are whole UTF-8 sequences or ASCII, so the text stays UTF-8.
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }
}

/// `haystack` with every `needle` replaced by `with`, or `None` when there is none.
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let mut at = find(haystack, needle)?;
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    loop {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + needle.len()..];
        match find(rest, needle) {
            Some(next) => at = next,
            None => break,
        }
    }
    out.extend_from_slice(rest);
    Some(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, tail) = needle.split_first()?;
    let mut from = 0;
    while from + needle.len() <= haystack.len() {
        let i = from
            + haystack[from..=haystack.len() - needle.len()]
                .iter()
                .position(|&b| b == first)?;
        if &haystack[i + 1..i + needle.len()] == tail {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

/// The JSON string text of `value` with every non-ASCII character as `\uXXXX` (UTF-16).
fn ascii_json(value: &str) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    let inner = &json[1..json.len() - 1];
    let mut out = String::with_capacity(inner.len());
    for c in inner.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// `value` with every byte outside RFC 3986's unreserved set percent-encoded.
fn percent(value: &str, upper: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// The base64 characters that encode `value` alone when it starts `offset` bytes (0 to 2) into a
/// 3-byte group of the encoded data: the whole 4-character groups made of value bytes only.
fn base64_core(
    engine: &base64::engine::GeneralPurpose,
    value: &[u8],
    offset: usize,
) -> Option<String> {
    let skip = (3 - offset) % 3;
    let body = value.get(skip..)?;
    let whole = body.len() / 3 * 3;
    let core = engine.encode(&body[..whole]);
    (core.len() >= MIN_BASE64_CHARS).then_some(core)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(value: &str) -> Redactor {
        let mut r = Redactor::default();
        r.cover("KEY", value);
        r
    }

    #[test]
    fn every_form_is_replaced_and_other_text_is_borrowed() {
        let value = "sk-live/4f9a+b=c\"d";
        let r = covered(value);
        let json =
            serde_json::to_string(&serde_json::json!({"text": format!("key={value}.")})).unwrap();
        assert_eq!(
            r.redact_str(&json),
            r#"{"text":"key=[secret:KEY]."}"#,
            "the JSON-escaped form"
        );
        assert_eq!(r.redact_str(&format!("a {value} b")), "a [secret:KEY] b");
        assert_eq!(
            r.redact_str("u=sk-live%2F4f9a%2Bb%3Dc%22d&x"),
            "u=[secret:KEY]&x"
        );
        assert_eq!(
            r.redact_str("u=sk-live%2f4f9a%2bb%3dc%22d"),
            "u=[secret:KEY]"
        );
        for prefix in ["", "a", "ab", "abc", "abcd"] {
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                let encoded = engine.encode(format!("{prefix}{value} and more"));
                let out = r.redact_str(&encoded);
                assert!(
                    out.contains("[secret:KEY]"),
                    "{prefix:?}: {encoded} -> {out}"
                );
            }
        }
        let plain = "nothing secret here, sk-live but not the rest";
        assert!(matches!(r.redact_str(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn non_ascii_values_are_covered_as_json_escapes_too() {
        let r = covered("pässwörd-1234");
        assert_eq!(
            r.redact_str(r#""p\u00e4ssw\u00f6rd-1234""#),
            r#""[secret:KEY]""#
        );
        assert_eq!(r.redact_str("pässwörd-1234"), "[secret:KEY]");
    }

    #[test]
    fn specs_resolve_from_what_was_given_or_the_environment_and_name_what_is_missing() {
        let mut s = Secrets::default();
        s.set("MCPGW_T_GIVEN", "given-value-1").unwrap();
        assert!(
            s.set("MCPGW_T_SHORT", "short")
                .unwrap_err()
                .contains("shorter than 8")
        );
        assert!(
            s.set("bad name", "long enough")
                .unwrap_err()
                .contains("secret name")
        );
        let mut spec = serde_json::json!({"name": "m", "mcp_config": {
            "type": "stdio_mcp", "command": "x",
            "env": {"A": "plain", "B": {"secret": "MCPGW_T_GIVEN"}}}});
        assert!(s.resolve_spec(&mut spec).unwrap());
        assert_eq!(
            spec["mcp_config"]["env"]["B"],
            serde_json::json!({"secret": "MCPGW_T_GIVEN", "value": "given-value-1"})
        );
        assert_eq!(
            s.redactor().redact_str("x given-value-1"),
            "x [secret:MCPGW_T_GIVEN]"
        );
        let parsed: crate::wire::McpSpec = serde_json::from_value(spec).unwrap();
        parsed.validate().unwrap();
        let shown = serde_json::to_string(&parsed.masked()).unwrap();
        assert!(!shown.contains("given-value-1"), "{shown}");
        assert!(
            shown.contains(r#""B":{"secret":"MCPGW_T_GIVEN"}"#),
            "{shown}"
        );
        assert!(!format!("{parsed:?}").contains("given-value-1"));

        let mut missing = serde_json::json!({"name": "m", "mcp_config": {
            "type": "http_mcp", "url": "http://x/mcp",
            "headers": {"Authorization": {"secret": "MCPGW_T_NOT_SET_ANYWHERE"}}}});
        let e = s.resolve_spec(&mut missing).unwrap_err();
        assert!(e.contains("mcp_config.headers.Authorization"), "{e}");
        assert!(e.contains("MCPGW_T_NOT_SET_ANYWHERE"), "{e}");
        // A value given with its name (a binding's function resolved it) is used and covered.
        let mut given = serde_json::json!({"name": "m", "mcp_config": {
            "type": "stdio_mcp", "command": "x",
            "env": {"B": {"secret": "S", "value": "inline-value"}}}});
        assert!(s.resolve_spec(&mut given).unwrap());
        assert_eq!(s.redactor().redact_str("inline-value"), "[secret:S]");
        let mut short = serde_json::json!({"name": "m", "mcp_config": {
            "type": "stdio_mcp", "command": "x", "env": {"B": {"secret": "S", "value": "x"}}}});
        assert!(
            s.resolve_spec(&mut short)
                .unwrap_err()
                .contains("shorter than 8")
        );
        let mut plain = serde_json::json!({"name": "m", "mcp_config": {
            "type": "stdio_mcp", "command": "x", "env": {"A": "1"}}});
        assert!(!s.resolve_spec(&mut plain).unwrap());
    }

    #[test]
    fn a_host_keeps_given_secrets_out_of_its_configuration_echo_and_off_one_shot_commands() {
        use crate::driver::{Action, Host, HostConfig, Op, Submit};
        let config = HostConfig::from_json(
            r#"{"backend":{"kind":"local"},"secrets":{"MCPGW_T_CONF":"conf-value-123"}}"#,
        )
        .unwrap();
        assert!(!format!("{config:?}").contains("conf-value-123"));
        assert!(format!("{config:?}").contains("MCPGW_T_CONF"));
        assert!(
            !serde_json::to_string(&config)
                .unwrap()
                .contains("conf-value-123")
        );
        let e = HostConfig::from_json(r#"{"backend":{"kind":"local"},"secrets":{"K":"short"}}"#)
            .unwrap_err();
        assert!(
            e.message().contains("secrets: secret \"K\" is shorter"),
            "{e}"
        );

        // Without a session the spec would travel in a command: it is refused, and nothing runs.
        let mut host = Host::new(config).unwrap();
        let now = std::time::Instant::now();
        let op = host.submit(
            &Submit::new(Op::AddMcp {
                spec: serde_json::json!({"name": "m", "mcp_config": {"type": "stdio_mcp",
                    "command": "x", "env": {"K": {"secret": "MCPGW_T_CONF"}}}}),
            }),
            now,
        );
        match host.poll_action() {
            Some(Action::Done {
                op: done,
                result: Err(e),
            }) => {
                assert_eq!(done, op);
                assert!(e.message().contains("over the session channel only"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(host.poll_action().is_none());
    }

    #[test]
    fn a_spec_naming_a_secret_without_its_value_is_refused_by_the_validator() {
        let spec: crate::wire::McpSpec = serde_json::from_value(serde_json::json!({
            "name": "m", "mcp_config": {"type": "stdio_mcp", "command": "x",
            "env": {"B": {"secret": "S"}}}}))
        .unwrap();
        let e = spec.validate().unwrap_err();
        assert!(e.contains("mcp_config.env.B names secret \"S\""), "{e}");
        for bad in [
            serde_json::json!({"secret": 1}),
            serde_json::json!({"secret": "S", "other": 1}),
            serde_json::json!(7),
        ] {
            let r: Result<SpecValue, _> = serde_json::from_value(bad.clone());
            assert!(r.is_err(), "{bad}");
        }
    }
}
