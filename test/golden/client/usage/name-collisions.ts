// Hand-written usage of the name-collisions client: the client's own exports keep their names, the definitions
// that wanted them are numbered. Type-checked with tsc --strict in the test run.
import { createClient, type ApiResponse, type Client, type Intent } from '../name-collisions-2.0/index.js';
import type { ApiResponse2, Blob2, Client2, Intent2 } from '../name-collisions-2.0/index.js';

const client: Client = createClient({ baseUrl: 'http://127.0.0.1:8080' });

export async function use(intent: Intent): Promise<void> {
  // The client's ApiResponse wraps the petstore's ApiResponse (now ApiResponse2).
  const uploaded: ApiResponse<ApiResponse2, unknown> = await client.uploadFile({ path: { petId: 1 } });
  if (uploaded.ok) void uploaded.body.message;
  const pet: Client2 = { name: 'Rex' };
  const done = await client.completed({ body: pet }, { intent });
  if (done.kind === 'completed') void done.body.id;
  const side: Intent2 = 'buy';
  void side;
  // A binary body takes bytes: the Blob definition (now Blob2) does not shadow the global Blob.
  const photo = await client.putPhoto({ path: { petId: 1 }, body: new Blob([new Uint8Array([1, 2])]) });
  if (photo.ok) {
    const url: Blob2 = photo.body;
    void url;
  }
  // @ts-expect-error the Blob definition's shape is not a binary body
  await client.putPhoto({ path: { petId: 1 }, body: { url: 'x' } });
}
