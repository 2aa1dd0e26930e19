/** The device's im2020 key files in IndexedDB (database "privface"), never in the clear (issue 35 A5).
 *
 *  Store "keys" holds one record per subject ID: the bytes of the CLI's `--key` file format (wire record
 *  im2020.ClientKey) encrypted with AES-GCM (96-bit random IV, the subject ID as additional data) under one 256-bit
 *  WebCrypto key made non-extractable, kept as a CryptoKey object in store "wrapping": script of this origin can use
 *  it while the page runs, but nothing can read its bytes out, and the records themselves hold no p, q.
 *  Records of the plain form (the bare key-file bytes, pages before 0.x) are wrapped, in place, on first load. */

const DB = "privface";
const KEYS = "keys";
const WRAPPING = "wrapping";
const WRAPPING_ID = "aes-gcm";

/** A stored key file: AES-GCM ciphertext and tag of the key-file bytes. */
interface Wrapped {
  v: 1;
  iv: Uint8Array;
  data: ArrayBuffer;
}

function open(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 2);
    req.onupgradeneeded = () => {
      const db = req.result;
      if (!db.objectStoreNames.contains(KEYS)) db.createObjectStore(KEYS);
      if (!db.objectStoreNames.contains(WRAPPING)) db.createObjectStore(WRAPPING);
    };
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error("IndexedDB unavailable"));
  });
}

/** `f` on `store` in one transaction; resolves once it has committed, with what `f`'s last request gave. */
async function run<T>(store: string, mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest): Promise<T> {
  const db = await open();
  try {
    return await new Promise<T>((resolve, reject) => {
      const tx = db.transaction(store, mode);
      const req = f(tx.objectStore(store));
      tx.oncomplete = () => resolve(req.result as T);
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB transaction failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
    });
  } finally {
    db.close();
  }
}

let wrapping: Promise<CryptoKey> | null = null;

/** The origin's wrapping key: the stored one, else a new non-extractable one (kept unless another tab stored one first). */
function wrappingKey(): Promise<CryptoKey> {
  wrapping ??= (async () => {
    if (!globalThis.crypto?.subtle) {
      throw new Error("This page keeps your key with WebCrypto, which needs https (or localhost): open it over https.");
    }
    const stored = await run<unknown>(WRAPPING, "readonly", (s) => s.get(WRAPPING_ID));
    if (stored instanceof CryptoKey) return stored;
    const fresh = await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
    await run(WRAPPING, "readwrite", (s) => s.add(fresh, WRAPPING_ID)).catch(() => undefined); // lost a race: fine
    const kept = await run<unknown>(WRAPPING, "readonly", (s) => s.get(WRAPPING_ID));
    if (!(kept instanceof CryptoKey)) throw new Error("this browser cannot keep a key in IndexedDB");
    return kept;
  })().catch((e) => {
    wrapping = null;
    throw e;
  });
  return wrapping;
}

const utf8 = (s: string) => new TextEncoder().encode(s);

async function wrap(subjectId: string, keyFile: Uint8Array): Promise<Wrapped> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const data = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: utf8(subjectId) }, await wrappingKey(),
    keyFile as Uint8Array<ArrayBuffer>);
  return { v: 1, iv, data };
}

function isWrapped(v: unknown): v is Wrapped {
  const w = v as Wrapped;
  return typeof v === "object" && v !== null && w.v === 1 && w.iv instanceof Uint8Array && w.data instanceof ArrayBuffer;
}

function plain(v: unknown): Uint8Array | null {
  return v instanceof Uint8Array ? v : v instanceof ArrayBuffer ? new Uint8Array(v) : null;
}

export async function saveKey(subjectId: string, keyFile: Uint8Array): Promise<void> {
  const record = await wrap(subjectId, keyFile);
  await run(KEYS, "readwrite", (s) => s.put(record, subjectId));
}

export async function loadKey(subjectId: string): Promise<Uint8Array | null> {
  const v = await run<unknown>(KEYS, "readonly", (s) => s.get(subjectId));
  const old = plain(v);
  if (old) {
    await migrate(subjectId, old);
    return old;
  }
  if (!isWrapped(v)) return null;
  try {
    const iv = v.iv as Uint8Array<ArrayBuffer>;
    return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv, additionalData: utf8(subjectId) },
      await wrappingKey(), v.data));
  } catch {
    throw new Error(`The stored key of ${subjectId} cannot be unwrapped on this device: import your key file again.`);
  }
}

export async function deleteKey(subjectId: string): Promise<void> {
  await run(KEYS, "readwrite", (s) => s.delete(subjectId));
}

/** Replace the plain record `old` of `subjectId` by its wrapped form, unless it changed meanwhile (another tab). */
async function migrate(subjectId: string, old: Uint8Array): Promise<void> {
  const record = await wrap(subjectId, old);
  const db = await open();
  try {
    await new Promise<void>((resolve, reject) => {
      const tx = db.transaction(KEYS, "readwrite");
      const store = tx.objectStore(KEYS);
      const req = store.get(subjectId);
      req.onsuccess = () => {
        const now = plain(req.result);
        if (now && now.length === old.length && now.every((b, i) => b === old[i])) store.put(record, subjectId);
      };
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB transaction failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
    });
  } finally {
    db.close();
  }
}

/** Every (subject ID, stored record), read in one transaction. */
async function entries(): Promise<[string, unknown][]> {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const out: [string, unknown][] = [];
      const tx = db.transaction(KEYS, "readonly");
      const req = tx.objectStore(KEYS).openCursor();
      req.onsuccess = () => {
        const c = req.result;
        if (c) {
          out.push([String(c.key), c.value]);
          c.continue();
        }
      };
      tx.oncomplete = () => resolve(out);
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB transaction failed"));
    });
  } finally {
    db.close();
  }
}

/** The subject IDs with a stored key; first wraps any record still in the plain form (the page calls this on load). */
export async function listKeys(): Promise<string[]> {
  const all = await entries();
  for (const [id, v] of all) {
    const old = plain(v);
    if (old) await migrate(id, old);
  }
  return all.map(([id]) => id);
}
