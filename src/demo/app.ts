/**
 * The demo's business service: `POST /v1/demo-requests` and `GET /v1/demo-requests/:id` (plus the test
 * fixtures' other routes) behind the generated Express guards and the embedded SQLite store, with a
 * "network" in front of them that can lose a delivery's response, drop or stall it — by `X-Request-Id`.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { GuardLogEvent } from '../runtime/guard.js';

/** What the demo needs of a generated server module (`server/index.ts`). */
export interface GeneratedServer {
  readonly SqliteStore: new (db: unknown, options?: Record<string, unknown>) => { migrate(): Promise<void> };
  createGuards(options: {
    readonly store: unknown;
    readonly principal?: (req: unknown) => string | undefined;
    readonly log?: (event: GuardLogEvent) => void;
  }): Record<string, RequestHandler & { readonly status?: RequestHandler }>;
}

/** What the "network" does to one delivery, chosen by its `X-Request-Id`. */
export type Fault =
  /** The handler runs and the result is saved, but the response never reaches the client. */
  | { readonly kind: 'lose-response' }
  /** The connection breaks after `afterMs` while the handler keeps running. */
  | { readonly kind: 'drop'; readonly afterMs: number }
  /** The request is lost on the way in: nothing runs. */
  | { readonly kind: 'drop-before' }
  /** The server never answers. */
  | { readonly kind: 'stall' };

/** A running demo service. */
export interface DemoService {
  readonly baseUrl: string;
  /** Faults to inject, by request id. */
  readonly faults: Map<string, Fault>;
  /** Milliseconds the create handler takes, by request id (default 0). */
  readonly handlerDelays: Map<string, number>;
  /** Every delivery that reached the service: its request id and arrival time (ms since the epoch). */
  readonly arrivals: { readonly requestId: string; readonly at: number; readonly path: string }[];
  /** Guard log events (safe fields only). */
  readonly log: GuardLogEvent[];
  /** Business effects so far: rows in `demo_requests` plus `emails` sent. */
  effects(): number;
  /** Calls of the non-idempotent `POST /v1/pings` (always answered 503). */
  pings(): number;
  close(): Promise<void>;
}

/**
 * Starts the service on 127.0.0.1 (a free port) with its SQLite database at `dbFile`.
 * @param server the generated server module.
 */
export async function startDemoService(server: GeneratedServer, dbFile: string): Promise<DemoService> {
  const express = (await import('express')).default;
  const Database = (await import('better-sqlite3')).default;
  const db = new Database(dbFile);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE IF NOT EXISTS demo_requests (id TEXT PRIMARY KEY, topic TEXT NOT NULL, email TEXT NOT NULL, state TEXT NOT NULL)');
  db.exec('CREATE TABLE IF NOT EXISTS emails (id TEXT PRIMARY KEY, recipient TEXT NOT NULL)');
  const store = new server.SqliteStore(db);
  await store.migrate();

  const faults = new Map<string, Fault>();
  const handlerDelays = new Map<string, number>();
  const arrivals: { requestId: string; at: number; path: string }[] = [];
  const log: GuardLogEvent[] = [];
  const stalled = new Set<Request>();
  const guards = server.createGuards({ store, principal: () => 'demo-user', log: (event) => log.push(event) });

  const network = (req: Request, res: Response, next: NextFunction): void => {
    const requestId = req.header('x-request-id') ?? '';
    arrivals.push({ requestId, at: Date.now(), path: req.path });
    const fault = faults.get(requestId);
    if (fault === undefined) return next();
    switch (fault.kind) {
      case 'drop-before':
        req.socket.destroy();
        return;
      case 'stall':
        stalled.add(req);
        req.on('close', () => stalled.delete(req));
        return;
      case 'drop':
        setTimeout(() => req.socket.destroy(), fault.afterMs);
        return next();
      case 'lose-response':
        // Whatever the guard finally writes (after it recorded the result) is lost with the connection.
        res.end = (() => {
          req.socket.destroy();
          return res;
        }) as Response['end'];
        return next();
    }
  };

  const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const app = express();
  const json = express.json();
  const use = (name: string): RequestHandler => {
    const guard = guards[name];
    if (guard === undefined) throw new Error(`the generated server has no guard for ${name}`);
    return guard;
  };

  app.post('/v1/demo-requests', network, json, use('createDemoRequest'), async (req: Request, res: Response) => {
    await wait(handlerDelays.get(req.header('x-request-id') ?? '') ?? 0);
    const body = req.body as { topic: string; contact: { email: string } };
    const count = (db.prepare('SELECT COUNT(*) AS n FROM demo_requests').get() as { n: number }).n;
    // The article's result id: the first request of the demo is demo-request-42.
    const id = `demo-request-${42 + count}`;
    db.prepare('INSERT INTO demo_requests (id, topic, email, state) VALUES (?, ?, ?, ?)').run(id, body.topic, body.contact.email, 'received');
    res.status(201).json({ id, state: 'received' });
  });

  // The status route after an unknown outcome: the guard answers a request that carries the key from its record.
  const outcome = guards['createDemoRequest']?.status;
  if (outcome !== undefined) {
    app.get('/v1/demo-request-outcome', network, outcome, (_req: Request, res: Response) => {
      res.status(400).json({ type: 'about:blank', title: 'Send the Idempotency-Key header of the request to look up', status: 400 });
    });
  }

  app.get('/v1/demo-requests/:id', network, (req: Request, res: Response) => {
    const row = db.prepare('SELECT id, state FROM demo_requests WHERE id = ?').get(req.params['id'] ?? '');
    if (row === undefined) res.status(404).json({ type: 'about:blank', title: 'Not found', status: 404 });
    else res.status(200).json(row);
  });

  if (guards['sendEmail'] !== undefined) {
    app.post('/v1/emails', network, json, use('sendEmail'), (req: Request, res: Response) => {
      const body = req.body as { to: string };
      const count = (db.prepare('SELECT COUNT(*) AS n FROM emails').get() as { n: number }).n;
      const id = `email-${count + 1}`;
      db.prepare('INSERT INTO emails (id, recipient) VALUES (?, ?)').run(id, body.to);
      res.status(202).json({ id, state: 'sent' });
    });
    app.get('/v1/emails/:id', network, (req: Request, res: Response) => {
      const row = db.prepare('SELECT id FROM emails WHERE id = ?').get(req.params['id'] ?? '') as { id: string } | undefined;
      if (row === undefined) res.status(404).json({ type: 'about:blank', title: 'Not found', status: 404 });
      else res.status(200).json({ id: row.id, state: 'sent' });
    });
  }

  let pings = 0;
  app.post('/v1/pings', network, (_req: Request, res: Response) => {
    pings += 1;
    res.status(503).json({ type: 'about:blank', title: 'Busy', status: 503 });
  });

  const http: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = http.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    faults,
    handlerDelays,
    arrivals,
    log,
    effects() {
      const n = (table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
      return n('demo_requests') + n('emails');
    },
    pings: () => pings,
    async close() {
      for (const req of stalled) req.socket.destroy();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      db.close();
    },
  };
}
