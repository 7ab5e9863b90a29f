//! Tests of the redactor: each kind of secret it masks, what it leaves alone, and that
//! masking keeps every other byte.

use super::*;
use contextfold_core::Role;
use proptest::prelude::*;
use serde_json::json;

// Fake secrets of the right shapes, built so that no file holds a whole one.
fn fake(prefix: &str, body: &str, times: usize) -> String {
    format!("{prefix}{}", body.repeat(times))
}

fn anthropic() -> String {
    fake("sk-ant-api03-", "Ab3dEf9hIj", 9)
}
fn openai() -> String {
    fake("sk-proj-", "q1W2e3R4t5Y6", 4)
}
fn github() -> String {
    fake("ghp_", "a1B2c3D4e5F6", 3)
}

/// Checks that `text` redacts to `expected` and that its findings have `kinds`.
fn check(text: &str, expected: &str, kinds: &[Kind]) {
    let redactor = Redactor::default();
    let found: Vec<Kind> = redactor.find(text).iter().map(|finding| finding.kind).collect();
    assert_eq!(found, kinds, "kinds in {text:?}");
    assert_eq!(redactor.redact_text(text), expected, "redaction of {text:?}");
}

/// Checks that `text` has no findings and is left as it is.
fn untouched(text: &str) {
    let redactor = Redactor::default();
    assert_eq!(redactor.find(text), Vec::new(), "false positive in {text:?}");
    assert!(matches!(redactor.redact_text(text), Cow::Borrowed(_)));
}

#[test]
fn cloud_keys() {
    let id = fake("AKIA", "Z7Q2", 4);
    check(
        &format!("aws_access_key_id = {id}\n"),
        "aws_access_key_id = [REDACTED:aws-access-key-id]\n",
        &[Kind::AwsAccessKeyId],
    );
    check(
        &format!("key {} used", fake("ASIA", "K9X3", 4)),
        "key [REDACTED:aws-access-key-id] used",
        &[Kind::AwsAccessKeyId],
    );
    let secret = fake("", "wJalrXUtnF/K7MDENG+b", 2);
    check(
        &format!("[default]\naws_secret_access_key = {secret}\nregion = us-east-1\n"),
        "[default]\naws_secret_access_key = [REDACTED:aws-secret-key]\nregion = us-east-1\n",
        &[Kind::AwsSecretKey],
    );
    let account = fake("", "dGVzdGtleQ", 8) + "==";
    check(
        &format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={account};EndpointSuffix=core.windows.net"),
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED:azure-key];EndpointSuffix=core.windows.net",
        &[Kind::AzureKey],
    );
    let pem = format!("-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n", fake("MIIE", "vQIBADANBg", 6));
    check(
        &format!(r#"{{"type": "service_account", "private_key": "{pem}", "client_email": "a@b.iam"}}"#),
        r#"{"type": "service_account", "private_key": "[REDACTED:gcp-private-key]", "client_email": "a@b.iam"}"#,
        &[Kind::GcpPrivateKey],
    );
}

#[test]
fn api_tokens() {
    let cases = [
        (anthropic(), Kind::AnthropicKey),
        (openai(), Kind::OpenAiKey),
        (fake("sk-", "T3BlbkFJ", 6), Kind::OpenAiKey),
        (github(), Kind::GithubToken),
        (fake("github_pat_", "11ABCDEFG0", 4), Kind::GithubToken),
        (fake("gho_", "Zz09", 9), Kind::GithubToken),
        (fake("ghs_", "Yy18", 9), Kind::GithubToken),
        (fake("xoxb-", "1234-5678-abcd", 2), Kind::SlackToken),
        (fake("xoxp-", "9a8b7c6d", 3), Kind::SlackToken),
        (fake("sk_live_", "4eC39HqLyjWD", 2), Kind::StripeKey),
        (fake("rk_live_", "51H8z2kA", 3), Kind::StripeKey),
        (fake("AIza", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", 1), Kind::GoogleApiKey),
        (format!("eyJhbGciOiJIUzI1NiJ9.{}.{}", fake("eyJ", "zdWIiOiIx", 3), fake("", "SflKxwRJSM", 3)), Kind::Jwt),
    ];
    for (token, kind) in cases {
        let mask = format!("[REDACTED:{}]", kind.name());
        check(&format!("token: {token}"), &format!("token: {mask}"), &[kind]);
        check(&format!("\"{token}\","), &format!("\"{mask}\","), &[kind]);
    }
}

#[test]
fn private_key_blocks_keep_their_armour() {
    let body = format!("{}\n{}\n", fake("MIIEow", "IBAAKCAQEA", 6), fake("", "xq3Rz0+/", 8));
    check(
        &format!("$ cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n$ ls"),
        "$ cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----[REDACTED:private-key]-----END RSA PRIVATE KEY-----\n$ ls",
        &[Kind::PrivateKey],
    );
    // A block cut short (a clipped output) loses its base64 lines all the same.
    check(
        &format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}[… 40 lines clipped …]"),
        "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED:private-key][… 40 lines clipped …]",
        &[Kind::PrivateKey],
    );
}

#[test]
fn authorization_headers() {
    let token = fake("", "aB3dE6gH9", 3);
    check(
        &format!("curl -H 'Authorization: Bearer {token}' https://api"),
        "curl -H 'Authorization: Bearer [REDACTED:authorization]' https://api",
        &[Kind::Authorization],
    );
    check(
        &format!(r#"{{"headers": {{"authorization": "Basic {token}=="}}}}"#),
        r#"{"headers": {"authorization": "Basic [REDACTED:authorization]"}}"#,
        &[Kind::Authorization],
    );
    untouched("curl -H \"Authorization: Bearer $TOKEN\" https://api");
    untouched("Authorization: Bearer <token>");
}

#[test]
fn secret_assignments() {
    let value = "s3cr3t-Pa55w0rd!";
    for (line, masked) in [
        (format!("DB_PASSWORD={value}"), "DB_PASSWORD=[REDACTED:secret]"),
        (format!("export STRIPE_WEBHOOK_SECRET={value}"), "export STRIPE_WEBHOOK_SECRET=[REDACTED:secret]"),
        (format!("  SERVICE_TOKEN: {value}"), "  SERVICE_TOKEN: [REDACTED:secret]"),
        (format!(r#""MY_API_KEY": "{value}""#), r#""MY_API_KEY": "[REDACTED:secret]""#),
        (format!("password = '{value}'"), "password = '[REDACTED:secret]'"),
        (format!("app.secret_key = \"{value}\""), "app.secret_key = \"[REDACTED:secret]\""),
    ] {
        check(&format!("{line}\nDEBUG=1\n"), &format!("{masked}\nDEBUG=1\n"), &[Kind::Assignment]);
    }
}

#[test]
fn ordinary_code_is_not_a_secret() {
    for text in [
        "password = input()",
        "password = getpass.getpass('Password: ')",
        "api_key = os.environ[\"OPENAI_API_KEY\"]",
        "API_KEY = os.getenv('API_KEY')",
        "export GITHUB_TOKEN=$(gh auth token)",
        "export ANTHROPIC_API_KEY=${ANTHROPIC_API_KEY}",
        "OPENAI_API_KEY=your-api-key-here",
        "SECRET_KEY=changeme",
        "    secret_key: SecretStr",
        "    db_password: settings.database.password",
        "token: str = Field(default=None)",
        "client(api_key=api_key, timeout=30)",
        r#""password": "Enter your password""#,
        r#"{"primary_key": "user_id_123456", "next_token": "abcdef123456789"}"#,
        "AUTH_TOKEN=xxxxxxxxxxxxxxxx",
        "sk-learn is not scikit-learn",
        "see https://example.com/task-management-dashboard-overview",
        "def refresh_token(self): return self._token",
        "max_tokens: 4096",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        "The eyJ prefix marks a base64url JSON header.",
    ] {
        untouched(text);
    }
}

#[test]
fn a_masked_text_has_no_findings() {
    let text =
        format!("ANTHROPIC_API_KEY={}\nAuthorization: Bearer {}\n{}\n", anthropic(), openai(), fake("AKIA", "Z7Q2", 4));
    let redactor = Redactor::default();
    let masked = redactor.redact_text(&text);
    assert_eq!(
        masked,
        "ANTHROPIC_API_KEY=[REDACTED:anthropic-key]\nAuthorization: Bearer [REDACTED:openai-key]\n\
         [REDACTED:aws-access-key-id]\n"
    );
    assert!(redactor.find(&masked).is_empty());
    // A value holding a mask was redacted before, whatever its pattern.
    untouched(r#""private_key": "-----BEGIN PRIVATE KEY-----[REDACTED:private-key]-----END PRIVATE KEY-----""#);
}

#[test]
fn values_and_messages_are_walked() {
    let redactor = Redactor::default();
    let mut value = json!({"env": ["A=1", format!("GH_TOKEN={}", github())], "n": 3, "ANTHROPIC_API_KEY": "ok"});
    assert_eq!(redactor.redact_value(&mut value), 1);
    assert_eq!(value, json!({"env": ["A=1", "GH_TOKEN=[REDACTED:github-token]"], "n": 3, "ANTHROPIC_API_KEY": "ok"}));

    let mut message = Message::from_value(
        json!({"role": "user", "content": [
            {"type": "text", "text": format!("my key is {}", openai())},
            {"type": "tool_result", "tool_use_id": "t1", "content": format!("token={}", anthropic())},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": fake("AKIA", "Z7Q2", 4)}}
        ]}),
        0,
    )
    .unwrap();
    let image = message.content[2].clone();
    assert_eq!(redactor.redact_message(&mut message), 2);
    let text = message.to_value().to_string();
    assert!(
        text.contains("my key is [REDACTED:openai-key]") && text.contains("token=[REDACTED:anthropic-key]"),
        "{text}"
    );
    assert_eq!(message.content[2], image, "image data is not searched");
    let mut plain = Message::text(Role::User, "nothing to hide here");
    assert_eq!(redactor.redact_message(&mut plain), 0);
}

/// Pieces of text that, glued together at random, make texts with and without secrets.
fn pieces() -> Vec<String> {
    vec![
        anthropic(),
        openai(),
        github(),
        fake("AKIA", "Z7Q2", 4),
        "Authorization: Bearer ".into(),
        "API_KEY=".into(),
        "\"DB_PASSWORD\": \"".into(),
        "-----BEGIN PRIVATE KEY-----\n".into(),
        "-----END PRIVATE KEY-----".into(),
        "s3cr3t-Pa55w0rd".into(),
        "[REDACTED:secret]".into(),
        "eyJhbGciOiJIUzI1NiJ9.".into(),
        "\n".into(),
        " ".into(),
        "\"".into(),
        "=".into(),
        "password = input()".into(),
        "fn main() {}".into(),
    ]
}

proptest! {
    #[test]
    fn redaction_is_idempotent_and_only_touches_findings(
        parts in proptest::collection::vec((0..18usize, "[a-zA-Z0-9 _=:.\n-]{0,12}"), 0..12)
    ) {
        let pieces = pieces();
        let text: String = parts.iter().map(|(index, noise)| format!("{}{noise}", pieces[*index])).collect();
        let redactor = Redactor::default();
        let once = redactor.redact_text(&text).into_owned();
        prop_assert_eq!(redactor.redact_text(&once), once.as_str());
        if redactor.find(&text).is_empty() {
            prop_assert_eq!(&once, &text);
        } else {
            prop_assert!(once.contains("[REDACTED:"));
        }
        // Text outside the findings is kept byte for byte.
        let mut at = 0;
        for finding in redactor.find(&text) {
            prop_assert!(once.contains(&text[at..finding.range.start]));
            at = finding.range.end;
        }
        prop_assert!(once.ends_with(&text[at..]));
    }
}
