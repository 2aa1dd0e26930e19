/** The device's im2020 key files in IndexedDB (database "privface", store "keys", one record per subject ID):
 *  the bytes of the CLI's `--key` file format (wire record im2020.ClientKey). Nothing else is kept. */

const DB = "privface";
const STORE = "keys";

function open(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error("IndexedDB unavailable"));
  });
}

async function run<T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest): Promise<T> {
  const db = await open();
  try {
    return await new Promise<T>((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = f(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req.result as T);
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB transaction failed"));
    });
  } finally {
    db.close();
  }
}

export async function saveKey(subjectId: string, keyFile: Uint8Array): Promise<void> {
  await run("readwrite", (s) => s.put(keyFile, subjectId));
}

export async function loadKey(subjectId: string): Promise<Uint8Array | null> {
  const v = await run<unknown>("readonly", (s) => s.get(subjectId));
  return v instanceof Uint8Array ? v : v instanceof ArrayBuffer ? new Uint8Array(v) : null;
}

export async function deleteKey(subjectId: string): Promise<void> {
  await run("readwrite", (s) => s.delete(subjectId));
}

export async function listKeys(): Promise<string[]> {
  return (await run<IDBValidKey[]>("readonly", (s) => s.getAllKeys())).map(String);
}
