/** A mistake in how idemkit was called (bad flag, unknown rule id, malformed config). Exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  constructor(message: string, readonly file?: string, readonly line?: number, readonly column?: number) {
    super(message);
  }
}

/** An unreadable or invalid input document. Exit code 2; printed as `file:line:column message`. */
export class DocumentError extends Error {
  override readonly name = 'DocumentError';
  constructor(
    message: string,
    readonly file: string,
    readonly pointer?: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message);
  }
}

/** A bug in idemkit itself. Exit code 2; the stack is shown with `--verbose`. */
export class InternalError extends Error {
  override readonly name = 'InternalError';
}
