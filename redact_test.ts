import assert from "node:assert/strict";
import { redactSecrets, redactUrl } from "./redact.ts";

Deno.test("redactUrl() hides the user information and every query value", () => {
  assert.equal(
    redactUrl("https://user:pass@example.com:8443/a/b.yaml?token=abc&x=1&fresh#top"),
    "https://***@example.com:8443/a/b.yaml?token=***&x=***&fresh#top",
  );
  assert.equal(redactUrl("http://token@h/p"), "http://***@h/p");
  assert.equal(redactUrl("https://example.com/s.yaml"), "https://example.com/s.yaml");
  assert.equal(redactUrl("snap.yaml"), "snap.yaml");
  assert.equal(redactUrl("cm://ns/name"), "cm://ns/name");
});

Deno.test("redactUrl() hides a password typed with a slash or a question mark before the @", () => {
  assert.equal(redactUrl("https://u:p/ss@host/x"), "https://***@host/x");
  assert.equal(redactUrl("https://u:p@ss@host/x?a=b@c"), "https://***@host/x?a=***");
});

Deno.test("redactSecrets() redacts every URL inside a message, quoted or not", () => {
  const message =
    "Cannot read snapshot 'https://me:s3cret@h.example/x?sig=zz': connect ECONNREFUSED, also http://a:b@c/ and (https://d/e?k=v).";
  const out = redactSecrets(message);
  assert.equal(
    out,
    "Cannot read snapshot 'https://***@h.example/x?sig=***': connect ECONNREFUSED, also http://***@c/ and (https://d/e?k=***).",
  );
  for (const secret of ["me:", "s3cret", "zz", "a:b", "k=v"]) assert.ok(!out.includes(secret));
});

Deno.test("redactSecrets() leaves text without a URL as it is", () => {
  const text = "user@host: key=value ?a=b";
  assert.equal(redactSecrets(text), text);
});

Deno.test("redactSecrets() hides a password with a quote in it inside a quoted URL", () => {
  assert.equal(
    redactSecrets("Cannot read 'https://u:p'w@host/x?t=1': refused"),
    "Cannot read 'https://***@host/x?t=***': refused",
  );
});
