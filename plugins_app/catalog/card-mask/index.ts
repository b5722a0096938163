// card-mask: replaces payment card numbers in what a person sends, before the model sees it.

// Candidates: 13-19 digits written together, or grouped 4-4-4-4(-3), 4-6-5 (Amex) or 4-6-4
// (Diners) with one consistent space or dash. The lookarounds refuse slices of longer numbers.
const CANDIDATE = new RegExp([
  String.raw`(?<![\d-])\d{13,19}(?![\d])`,
  String.raw`(?<![\d][ -]?)\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?(?!\d|[ -]\d)`,
  String.raw`(?<![\d][ -]?)\d{4}([ -])\d{6}\2\d{4,5}(?!\d|[ -]\d)`,
].join("|"), "g");

// Issuer ranges start with 2 (Mastercard 2-series), 3 (Amex, Diners, JCB), 4 (Visa),
// 5 (Mastercard, Maestro) or 6 (Discover, UnionPay, Maestro); 13-digit epoch milliseconds
// and most ids start with 1.
const ISSUER = /^[2-6]/;

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

// Every candidate above holds 13 digits, each apart from the next by at most one space or dash: a
// message without such a run is left out before the handler starts (RE2's \d is ASCII, as JavaScript's).
globalThis.middleware.match = { userMessageInbound: { text: { regex: "[0-9](?:[ -]?[0-9]){12}" } } };

globalThis.middleware.userMessageInbound = async (context) => {
  const keepLast4 = host.config.keepLast4 as boolean;
  return context.text.replace(CANDIDATE, (match: string) => {
    const digits = match.replace(/[ -]/g, "");
    if (!ISSUER.test(digits) || !luhn(digits)) return match;
    return keepLast4 ? `[card ending ${digits.slice(-4)}]` : "[card number removed]";
  });
};
