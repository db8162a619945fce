"""Password and token hashes for the API's credential files (issue 13): Werkzeug's password hashing.

A password hash is Werkzeug's ``scrypt:131072:8:1$<salt>$<hex>`` (OWASP's scrypt parameters: N=2^17, r=8, p=1) or,
with ``--scheme pbkdf2_sha256``, ``pbkdf2:sha256:600000$<salt>$<hex>`` (OWASP's PBKDF2-HMAC-SHA256 iterations). Lines
written before (``scrypt$<n>$<r>$<p>$<salt>$<key>``, ``pbkdf2_sha256$<iterations>$<salt>$<key>``, base64) still
verify. A user the file does not name is checked against :func:`dummy_hash`, a hash of a random password made with
the method most of the file's hashes use, so that an unknown name costs the same hash as a known one (its answer's
time does not tell which names exist). A token hash is ``sha256$<hex>`` (a token is 32 random bytes, so a fast hash
is enough). The files (``api.auth.basic.file``, ``api.auth.token.file``) hold one ``<principal>:<hash>`` a line;
``#`` starts a comment.

    python -m connect_state.api.passwords hash alice      # asks for the password (or reads it from stdin)
    python -m connect_state.api.passwords token ops-bot   # makes a token: prints it, and the line for the file
"""

from __future__ import annotations

import argparse
import base64
import getpass
import hashlib
import hmac
import secrets
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from enum import StrEnum

from werkzeug.security import check_password_hash, generate_password_hash

__all__ = ["HashScheme", "dummy_hash", "hash_password", "hash_token", "method_of", "new_token", "verify_password"]


class HashScheme(StrEnum):
    SCRYPT = "scrypt"
    PBKDF2_SHA256 = "pbkdf2_sha256"
    SHA256 = "sha256"


#: Werkzeug's method of each password scheme.
METHODS = {HashScheme.SCRYPT: "scrypt:131072:8:1", HashScheme.PBKDF2_SHA256: "pbkdf2:sha256:600000"}


def hash_password(password: str, scheme: HashScheme = HashScheme.SCRYPT) -> str:
    """A salted hash of ``password`` for the basic-auth file."""
    if scheme not in METHODS:
        raise ValueError(f"{scheme} is not a password scheme")
    return generate_password_hash(password, METHODS[scheme])


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (:func:`hash_password`'s form, or the form before it); False for a
    malformed hash."""
    parts = stored.split("$")
    try:
        if parts[0] not in (HashScheme.SCRYPT, HashScheme.PBKDF2_SHA256):
            return check_password_hash(stored, password)
        if parts[0] == HashScheme.SCRYPT and len(parts) == 6:  # the form before Werkzeug's
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            expected = base64.b64decode(parts[5])
            key = hashlib.scrypt(
                password.encode(), salt=base64.b64decode(parts[4]), n=n, r=r, p=p, dklen=len(expected), maxmem=2**26
            )
        elif parts[0] == HashScheme.PBKDF2_SHA256 and len(parts) == 4:
            expected = base64.b64decode(parts[3])
            key = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(parts[2]), int(parts[1]))
        else:
            return False
    except ValueError:
        return False
    return hmac.compare_digest(key, expected)


def method_of(stored: str) -> str | None:
    """Werkzeug's method of a stored hash (``scrypt:131072:8:1``, ``pbkdf2:sha256:600000``), the equivalent one for
    the form before Werkzeug's (``scrypt$16384$8$1$...`` -> ``scrypt:16384:8:1``); None for anything else."""
    parts = stored.split("$")
    if parts[0] == HashScheme.SCRYPT and len(parts) == 6 and all(part.isdigit() for part in parts[1:4]):
        return f"scrypt:{parts[1]}:{parts[2]}:{parts[3]}"
    if parts[0] == HashScheme.PBKDF2_SHA256 and len(parts) == 4 and parts[1].isdigit():
        return f"pbkdf2:sha256:{parts[1]}"
    if len(parts) == 3 and parts[0].split(":")[0] in ("scrypt", "pbkdf2"):
        return parts[0]
    return None


def dummy_hash(stored: Iterable[str]) -> str:
    """A hash of a random password with the method most of ``stored`` use (Werkzeug's scrypt default when none is
    usable): what an unknown user's password is checked against."""
    methods = Counter(method for method in map(method_of, stored) if method is not None)
    for method, _ in methods.most_common():
        try:
            return generate_password_hash(secrets.token_urlsafe(16), method)
        except (ValueError, TypeError):  # parameters Werkzeug refuses (a hand-edited line): the next most common
            continue
    return hash_password(secrets.token_urlsafe(16))


def new_token() -> str:
    """A new bearer token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a bearer token."""
    return f"{HashScheme.SHA256}${hashlib.sha256(token.encode()).hexdigest()}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connect_state.api.passwords", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    hash_cmd = sub.add_parser("hash", help="hash a password: prints the line for api.auth.basic.file")
    hash_cmd.add_argument("user")
    hash_cmd.add_argument("--scheme", choices=[HashScheme.SCRYPT, HashScheme.PBKDF2_SHA256], default=HashScheme.SCRYPT)
    token_cmd = sub.add_parser("token", help="make a token: prints it, then the line for api.auth.token.file")
    token_cmd.add_argument("principal")
    args = parser.parse_args(argv)
    if args.command == "hash":
        password = getpass.getpass(f"password for {args.user}: ") if sys.stdin.isatty() else sys.stdin.readline()
        password = password.rstrip("\n")
        if not password:
            print("empty password", file=sys.stderr)
            return 2
        print(f"{args.user}:{hash_password(password, HashScheme(args.scheme))}")
    else:
        token = new_token()
        note = f"line 1: the token (give it to {args.principal}; it is not stored); line 2: for the file"
        print(note, file=sys.stderr)
        print(token)
        print(f"{args.principal}:{hash_token(token)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
