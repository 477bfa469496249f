import type { ReserveInput } from '../../../src/runtime/store.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { describeStoreContract } from '../store-contract.js';

describeStoreContract('memory', async (clock) => {
  const store = new MemoryStore({ clock });
  // The memory store has no backend to read raw: remember every id it was asked to reserve and dump those records.
  const ids = new Set<string>();
  const reserve = store.reserve.bind(store);
  store.reserve = (input: ReserveInput) => {
    ids.add(input.id);
    return reserve(input);
  };
  return {
    store,
    async dump() {
      const records = await Promise.all([...ids].map((id) => store.get(id)));
      return JSON.stringify(records, (_, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v));
    },
  };
});
