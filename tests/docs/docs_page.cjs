/**
 * Opens a page of the built documentation site in Debian's Chromium with playwright-core (the machinery of the
 * web tests, tests/web), once per viewport, for tests/docs/test_site.py. One JSON argument
 * {url, origin, chromium, viewports: [{name, width, height, path}]} and one JSON line out: {results: [...]} with,
 * per viewport, the title, the first heading, the nav links, the widths (overflow), the text length, the code
 * blocks (how many, how many wider than their box), the
 * requests that left the site's origin (aborted) and the console errors; a screenshot is written to `path`.
 * Run with NODE_PATH=web/node_modules (playwright-core is the web client's dev dependency).
 */
const { chromium } = require("playwright-core");

async function main() {
  const job = JSON.parse(process.argv[2]);
  const browser = await chromium.launch({ executablePath: job.chromium, headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  const results = [];
  try {
    for (const vp of job.viewports) {
      const context = await browser.newContext({ viewport: { width: vp.width, height: vp.height } });
      const page = await context.newPage();
      const external = [];
      const errors = [];
      await page.route("**/*", (route) => {
        const url = route.request().url();
        if (url.startsWith(job.origin)) return route.continue();
        external.push(url);
        return route.abort();
      });
      page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.goto(job.url, { waitUntil: "networkidle" });
      await page.screenshot({ path: vp.path });
      const info = await page.evaluate(() => {
        const visible = (el) => !!el && el.getBoundingClientRect().width > 0 && getComputedStyle(el).visibility !== "hidden";
        return {
          title: document.title,
          h1: document.querySelector("article h1")?.textContent?.trim() ?? null,
          header_title: document.querySelector(".md-header__topic")?.textContent?.trim() ?? null,
          header_visible: visible(document.querySelector(".md-header")),
          nav_links: document.querySelectorAll("nav.md-nav--primary a.md-nav__link").length,
          nav_visible: visible(document.querySelector(".md-sidebar--primary nav.md-nav--primary")),
          drawer_button_visible: visible(document.querySelector("label.md-header__button[for='__drawer']")),
          scroll_width: document.documentElement.scrollWidth,
          inner_width: window.innerWidth,
          text_length: document.body.innerText.length,
          pre_count: document.querySelectorAll("article pre").length,
          pre_overflow: [...document.querySelectorAll("article pre > code")].filter((p) => p.scrollWidth > p.clientWidth + 1).length,
        };
      });
      results.push({ name: vp.name, ...info, external, errors, path: vp.path });
      await context.close();
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify({ results }));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String((e && e.stack) || e) }));
  process.exit(1);
});
