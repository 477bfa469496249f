/** A scripted HTTP server on 127.0.0.1 for the client tests that run the real `fetch`. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the server got it. */
export interface Arrival {
  readonly method: string;
  /** Path and query, as sent. */
  readonly path: string;
  /** Header names lower-cased; a header sent twice (in any letter case) keeps every value, in order. */
  readonly headers: Readonly<Record<string, readonly string[]>>;
  readonly body: string;
}

/** Answers one request; `arrival.body` is read already. */
export type Handler = (arrival: Arrival, res: http.ServerResponse) => void;

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly arrivals: Arrival[];
  /** The first value of a header of arrival `i` (`undefined` when absent). */
  header(i: number, name: string): string | undefined;
  close(): Promise<void>;
}

/** Starts a server that records every request and answers through `handler`. */
export async function startServer(handler: Handler): Promise<TestServer> {
  const arrivals: Arrival[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string[]> = {};
      for (let i = 0; i < req.rawHeaders.length; i += 2) (headers[req.rawHeaders[i]!.toLowerCase()] ??= []).push(req.rawHeaders[i + 1]!);
      const arrival = { method: req.method ?? '', path: req.url ?? '', headers, body: Buffer.concat(chunks).toString('utf8') };
      arrivals.push(arrival);
      handler(arrival, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    header: (i, name) => arrivals[i]?.headers[name.toLowerCase()]?.[0],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers `status` with `body` as JSON (or as it is, when a string) and `headers`. */
export function answer(res: http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  const type = body === undefined || typeof body === 'string' ? {} : { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' };
  res.writeHead(status, { ...type, ...headers });
  res.end(text);
}
