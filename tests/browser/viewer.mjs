// Load the graph viewer of a running worker in headless Chromium, pick a
// graph, ask a query, check the passages listed, keep a screenshot.
// Usage: node viewer.mjs URL GRAPH QUERY EXPECTED_TURN SCREENSHOT
import { chromium } from "playwright-core";

const [url, graph, query, expectedTurn, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(url);
  await page.waitForSelector(`#graph-select option[value="${graph}"]`, { state: "attached", timeout: 20000 });
  await page.selectOption("#graph-select", graph);
  await page.waitForFunction(() => document.querySelector("#graph canvas") !== null, null, { timeout: 20000 });
  await page.fill("#query", query);
  await page.click("#ask");
  await page.waitForSelector("#results li", { timeout: 20000 });
  const turns = await page.$$eval("#results li", (items) => items.map((li) => li.dataset.turn));
  const iterations = await page.$$eval("#iterations li", (items) => items.length);
  await page.waitForTimeout(1500); // let the spreading animation play before the picture
  await page.screenshot({ path: screenshot, fullPage: true });
  const result = { turns, iterations, errors, found: turns.includes(expectedTurn) };
  console.log(JSON.stringify(result));
  process.exit(result.found && iterations > 0 && errors.length === 0 ? 0 : 1);
} finally {
  await browser.close();
}
