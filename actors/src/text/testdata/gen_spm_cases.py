"""Reference cases for the Rust SentencePiece tokenizer, from Python `sentencepiece`.

Run from this folder (sentencepiece 0.2.3 made the committed files):

    python3 gen_spm_cases.py ../../../../../shared/fixtures/personaplex-tiny/tokenizer.model

It writes
  spm_fixture_cases.json        cases for the fixture model (personaplex-tiny, nmt_nfkc)
  spm_byte_fallback.model       a tiny unigram model trained here: byte_fallback,
                                identity normalizer, remove_extra_whitespaces off,
                                user-defined `<system>`, control `<ctl>`
  spm_byte_fallback_cases.json  cases for it

Each case: text, ids = encode(text), pieces = [id_to_piece(i) for i in ids] (the
fixture's convention), surface_pieces = encode(text, out_type=str), decoded =
decode(ids), decoded_pieces = decode(surface_pieces), normalized = normalize(text).
"""

import json
import random
import sys

import sentencepiece as spm

TEXTS = [
    "",
    " ",
    "   ",
    "Hello",
    "naïve café — déjà vu",
    "Ça va? À bientôt, señor Müller.",
    "e\u0301 (combining acute) vs é",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ﬁ ligature, ① ㍻",
    "Numbers 0123456789, 3.14 and -42%",
    "Punctuation: !?.,;:'\"()[]{}<>@#$^&*_+=|\\/~`",
    "multiple   spaces   inside",
    "   leading spaces",
    "trailing spaces   ",
    "\t tabs\tand\nnewlines\r\nhere \n",
    "no\u00a0break\u2003em\u3000ideographic spaces",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "emoji 🙂👍🏽 and 漢字 and Ελληνικά and עברית",
    "control \x01\x07\x1b chars and a nul \x00 here",
    "<system>",
    "<system><system>",
    "a<system>b",
    "bake<system>ry",
    "  <system>  spaced  <system>  ",
    "<sys tem> <SYSTEM> <system",
    "<s> </s> <pad> <unk> <ctl> literal specials",
    "a literal ▁ lower block and ▁▁ two",
    "▁leading block",
    "trailing block▁",
    "You work for a bakery. Be polite and brief.",
    "How are you doing today?",
    "customerservice conversation aboutbread throughthewindow",
    "x" * 40,
    "unk run: 3!5?7 then ::: and 💥💥💥",
    "\ufffd replacement char and \U0010fffd private use",
]


def rand_texts(n, seed):
    """Short random strings over a mix that stresses the normalizer and the lattice."""
    rng = random.Random(seed)
    pool = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ .,?!  ") + [
        "é", "ï", "à", "ñ", "ß", "ﬁ", "Ａ", "１", "①", "\u0301", "\u00a0", "\t", "\n",
        "▁", "🙂", "漢", "<system>", "<s>", "\x00", "\u200b", "3", ":",
    ]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 24))) for _ in range(n)]


def cases(model_file, texts):
    sp = spm.SentencePieceProcessor(model_file=model_file)
    out = []
    for text in texts:
        ids = sp.encode(text)
        surface = sp.encode(text, out_type=str)
        out.append(
            {
                "text": text,
                "ids": ids,
                "pieces": [sp.id_to_piece(i) for i in ids],
                "surface_pieces": surface,
                "decoded": sp.decode(ids),
                "decoded_pieces": sp.decode(surface),
                "normalized": sp.normalize(text),
            }
        )
    return out


def write(path, data):
    # One case a line: small diffs when regenerated.
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in data) + "\n]\n")


def train_byte_fallback_model():
    rng = random.Random(1)
    words = (
        "the quick brown fox jumps over the lazy dog you work for a bakery be polite "
        "and brief how are you doing today customer service conversation about bread"
    ).split()
    with open("/tmp/spm_byte_fallback_corpus.txt", "w") as f:
        for _ in range(400):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "\n")
    spm.SentencePieceTrainer.train(
        input="/tmp/spm_byte_fallback_corpus.txt",
        model_prefix="spm_byte_fallback",
        vocab_size=360,
        model_type="unigram",
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        user_defined_symbols=["<system>"],
        control_symbols=["<ctl>"],
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    # The trainer also writes a .vocab listing, not needed here.


def main():
    fixture = sys.argv[1]
    write("spm_fixture_cases.json", cases(fixture, TEXTS + rand_texts(30, 7)))
    train_byte_fallback_model()
    write("spm_byte_fallback_cases.json", cases("spm_byte_fallback.model", TEXTS + rand_texts(30, 8)))


if __name__ == "__main__":
    main()
