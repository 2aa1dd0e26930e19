/**
 * Drives the page in Debian's Chromium with playwright-core (Node), for the Python browser tests and
 * `privface bench web`: one JSON argument {url, chromium, fixture?, viewport?, camera?, deny_camera?, steps}
 * and one JSON line out: {results: [...]} with, per step, the page's status message, its state and the
 * report of the last action (decision, times, bytes). With `fixture` the page's bundle is the TEST FIXTURE
 * build (dist-test/app-fixture.js: face descriptors queued by the test instead of the face pipeline).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { chromium, type Page } from "playwright-core";

type Step =
  | { do: "goto"; path?: string }
  | { do: "subject"; id: string }
  | { do: "photo"; path: string }
  | { do: "camera" }
  | { do: "fixture"; descriptor: number[] | null }
  | { do: "click"; id: string }
  | { do: "import_key"; path: string }
  | { do: "export_key"; path: string }
  | { do: "screenshot"; path: string }
  | { do: "layout" }
  | { do: "clear_storage" }
  | { do: "offline" }
  | { do: "keys" }
  | { do: "api_key"; key: string }
  | { do: "pick_face"; index: number }
  | { do: "click_face"; index: number }
  | { do: "preview" }
  | { do: "longtasks" }
  | { do: "parity"; bundle: string; paths: string[]; names: string[]; backend?: string }
  | { do: "open"; path: string; wait: string }
  | { do: "eval"; js: string }
  | { do: "installability" }
  | { do: "offline_reload"; wait: string };

interface Job {
  url: string;
  chromium: string;
  fixture?: string;
  viewport?: { width: number; height: number };
  camera?: string;
  deny_camera?: boolean;
  steps: Step[];
  timeout_ms?: number;
  query?: string;
  out?: string;
  /** record the page's long tasks (PerformanceObserver "longtask") from its first script on; step "longtasks" */
  longtasks?: boolean;
}

async function seq(page: Page): Promise<number> {
  return Number((await page.evaluate(() => document.body.dataset.seq)) ?? 0);
}

async function settled(page: Page, before: number, timeout: number): Promise<Record<string, unknown>> {
  await page.waitForFunction((b) => Number(document.body.dataset.seq ?? 0) > b && document.body.dataset.busy !== "1",
    before, { timeout });
  return page.evaluate(() => {
    const st = document.getElementById("status")!;
    const res = document.getElementById("result")!;
    return {
      status: st.textContent, state: st.dataset.state,
      report: res.hidden || !res.dataset.report ? null : JSON.parse(res.dataset.report),
      decision: res.hidden ? null : document.getElementById("decision")!.textContent,
    };
  });
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2]!) as Job;
  const timeout = job.timeout_ms ?? 120_000;
  const args = ["--no-sandbox", "--disable-dev-shm-usage"];
  if (job.camera) {
    args.push("--use-fake-device-for-media-stream", `--use-file-for-fake-video-capture=${job.camera}`);
  }
  const browser = await chromium.launch({ executablePath: job.chromium, headless: true, args });
  const out: Record<string, unknown>[] = [];
  try {
    // a fixture build (and the parity bundle) is swapped in by page.route, which a service worker's own fetches would
    // bypass: none then
    const routed = !!job.fixture || job.steps.some((s) => s.do === "parity");
    const context = await browser.newContext({ viewport: job.viewport ?? { width: 1280, height: 900 }, acceptDownloads: true,
      serviceWorkers: routed ? "block" : "allow" });
    if (job.camera && !job.deny_camera) await context.grantPermissions(["camera"], { origin: new URL(job.url).origin });
    if (job.longtasks) {
      await context.addInitScript(() => {
        const g = globalThis as unknown as { __longtasks: { start: number; duration: number }[] };
        g.__longtasks = [];
        new PerformanceObserver((list) => {
          for (const e of list.getEntries()) g.__longtasks.push({ start: e.startTime, duration: e.duration });
        }).observe({ type: "longtask", buffered: true });
      });
    }
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    if (job.fixture) {
      const bundle = readFileSync(job.fixture);
      await page.route("**/app/app.js", (r) => r.fulfill({ body: bundle, contentType: "text/javascript",
        headers: { "cross-origin-resource-policy": "same-origin" } }));
    }
    for (const step of job.steps) {
      const t0 = performance.now();
      let res: Record<string, unknown> = {};
      switch (step.do) {
        case "goto": {
          const resp = await page.goto(job.url + (step.path ?? "/app/") + (job.query ?? ""), { waitUntil: "load" });
          await page.waitForFunction(() => document.getElementById("status")!.textContent !== "Loading…", null, { timeout });
          res = { http: resp?.status(), csp: resp?.headers()["content-security-policy"] ?? null,
            status: await page.textContent("#status"), url: page.url() };
          break;
        }
        case "subject":
          await page.fill("#subject", step.id);
          break;
        case "fixture":
          await page.evaluate((d) => {
            const g = globalThis as unknown as { __privfaceFixtureDescriptors?: (number[] | null)[] };
            (g.__privfaceFixtureDescriptors ??= []).push(d);
          }, step.descriptor);
          break;
        case "photo": {
          const b = await seq(page);
          await page.setInputFiles("#photo", step.path);
          res = await settled(page, b, timeout);
          break;
        }
        case "camera": {
          let b = await seq(page);
          await page.click("#camera-start");
          res = await settled(page, b, timeout);
          if (res.state === "error") break;
          await page.waitForFunction(() => (document.getElementById("video") as HTMLVideoElement).videoWidth > 0, null, { timeout });
          b = await seq(page);
          await page.click("#camera-shot");
          res = await settled(page, b, timeout);
          break;
        }
        case "click": {
          const b = await seq(page);
          await page.click(`#${step.id}`);
          res = await settled(page, b, timeout);
          break;
        }
        case "import_key": {
          const b = await seq(page);
          await page.setInputFiles("#key-import", step.path);
          res = await settled(page, b, timeout);
          break;
        }
        case "export_key": {
          const b = await seq(page);
          const [download] = await Promise.all([page.waitForEvent("download", { timeout }), page.click("#key-export")]);
          await download.saveAs(step.path);
          res = await settled(page, b, timeout);
          res.file = download.suggestedFilename();
          break;
        }
        case "screenshot":
          await page.screenshot({ path: step.path, fullPage: true });
          break;
        case "layout": // widths and positions as laid out, without scrolling (the report page's responsive tables)
          res = { layout: await page.evaluate(() => {
            const box = (e: Element) => e.getBoundingClientRect();
            return {
              viewport: { width: innerWidth, height: innerHeight },
              document_width: document.documentElement.scrollWidth,
              tables: [...document.querySelectorAll("table")].map((t) => ({
                class: t.className, right: box(t).right, scroll_width: t.parentElement!.scrollWidth,
                client_width: t.parentElement!.clientWidth,
                cells: [...t.querySelectorAll("td")].map((c) => ({
                  label: c.getAttribute("data-label"), width: box(c).width, right: box(c).right,
                  shown: getComputedStyle(c).display !== "none" && getComputedStyle(c).visibility !== "hidden" })),
              })),
              images: [...document.querySelectorAll("img")].map((i) => ({
                src: i.getAttribute("src"), top: box(i).top, bottom: box(i).bottom, loaded: i.complete && i.naturalWidth > 0,
                loading: i.getAttribute("loading") })),
            };
          }) };
          break;
        case "offline": // the server becomes unreachable: every protocol call fails at the network level
          await page.route("**/v1/**", (r) => r.abort("connectionrefused"));
          break;
        case "api_key":
          await page.click("details > summary");
          await page.fill("#api-key", step.key);
          break;
        case "keys":
          res = { keys: await page.textContent("#keys") };
          break;
        case "pick_face": { // choose a face in the list under the preview
          const b = await seq(page);
          await page.selectOption("#face-choice", String(step.index));
          res = await settled(page, b, timeout);
          break;
        }
        case "click_face": { // click the middle of face `index`'s box in the preview (boxes in photo pixels)
          const b = await seq(page);
          const { faces, size } = await page.evaluate(() => {
            const c = document.getElementById("canvas")!;
            return { faces: JSON.parse(c.dataset.faces ?? "[]") as number[][], size: (c.dataset.size ?? "1,1").split(",").map(Number) };
          });
          const [l, t, r, bt] = faces[step.index]!;
          const box = (await page.locator("#canvas").boundingBox())!;
          await page.mouse.click(box.x + ((l! + r!) / 2 / size[0]!) * box.width, box.y + ((t! + bt!) / 2 / size[1]!) * box.height);
          res = await settled(page, b, timeout);
          break;
        }
        case "preview":
          res = await page.evaluate(() => {
            const c = document.getElementById("canvas") as HTMLCanvasElement;
            const row = document.getElementById("face-row")!;
            return { hidden: c.hidden, width: c.width, height: c.height, faces: JSON.parse(c.dataset.faces ?? "[]"),
              used: c.dataset.used, choices: row.hidden ? [] : Array.from((document.getElementById("face-choice") as
                HTMLSelectElement).options).map((o) => o.text), source: document.getElementById("source")!.textContent };
          });
          break;
        case "longtasks":
          res = await page.evaluate(() => ({
            longtasks: (globalThis as unknown as { __longtasks?: unknown[] }).__longtasks ?? null,
            marks: performance.getEntriesByType("mark").map((m) => ({ name: m.name, start: m.startTime })),
          }));
          break;
        case "parity": { // embed files with the browser face pipeline (bench web --parity)
          const bundle = readFileSync(step.bundle);
          await page.route("**/app/parity.js", (r) => r.fulfill({ body: bundle, contentType: "text/javascript",
            headers: { "cross-origin-resource-policy": "same-origin" } }));
          await page.addScriptTag({ url: "parity.js", type: "module" });
          await page.waitForFunction(() => "privfaceParity" in globalThis, null, { timeout });
          const images = step.paths.map((p, i) => ({ name: step.names[i]!, b64: readFileSync(p).toString("base64") }));
          res = { parity: await page.evaluate(([imgs, backend]) =>
            (globalThis as unknown as { privfaceParity: (x: unknown, b?: string) => Promise<unknown> }).privfaceParity(imgs, backend),
          [images, step.backend] as const) };
          break;
        }
        case "open": { // another page of the server (e.g. /docs), once `wait` (a selector) is on it
          const resp = await page.goto(job.url + step.path, { waitUntil: "load" });
          await page.waitForSelector(step.wait, { timeout });
          const h = resp?.headers() ?? {};
          res = { http: resp?.status(), csp: h["content-security-policy"] ?? null, xfo: h["x-frame-options"] ?? null,
            text: await page.textContent("body") };
          break;
        }
        case "installability": { // Chromium's own check of the manifest and service worker (the install prompt's)
          await page.waitForFunction(() => navigator.serviceWorker?.controller !== null, null, { timeout });
          const cdp = await page.context().newCDPSession(page);
          const r = (await cdp.send("Page.getInstallabilityErrors")) as { installabilityErrors: unknown[] };
          const m = (await cdp.send("Page.getAppManifest")) as { url: string; errors: unknown[] };
          res = { errors: r.installabilityErrors, manifest: m.url, manifest_errors: m.errors };
          break;
        }
        case "offline_reload": { // the network goes away, the page is opened again (the service worker serves it)
          await page.context().setOffline(true);
          const resp = await page.reload({ waitUntil: "load" });
          await page.waitForSelector(step.wait, { timeout });
          await page.waitForFunction(() => document.getElementById("status")?.textContent !== "Loading…", null, { timeout });
          res = { http: resp?.status(), from_sw: resp?.fromServiceWorker() ?? null, status: await page.textContent("#status"),
            keys: await page.textContent("#keys") };
          await page.context().setOffline(false);
          break;
        }
        case "eval": // an expression evaluated in the page (awaited if a promise); its JSON value
          res = { value: await page.evaluate(step.js) };
          break;
        case "clear_storage":
          await page.evaluate(() => new Promise<void>((r) => { const q = indexedDB.deleteDatabase("privface"); q.onsuccess = q.onerror = () => r(); }));
          break;
      }
      out.push({ step: step.do, ms: performance.now() - t0, ...res });
    }
    out.push({ step: "errors", errors, browser: browser.version() });
  } finally {
    await browser.close();
  }
  const text = JSON.stringify({ results: out }) + "\n";
  if (job.out) writeFileSync(job.out, text); // large results: a file (a pipe takes 64 KiB per write)
  else await new Promise<void>((r) => process.stdout.write(text, () => r()));
}

main().catch((e) => {
  writeFileSync(1, JSON.stringify({ error: String(e?.stack ?? e) }) + "\n");
  process.exit(1);
});
