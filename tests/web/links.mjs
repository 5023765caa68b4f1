// The static page's link parser (web/static/links.js) on queries read from stdin as JSON
// {specs, tabs, queries: [search strings]}; prints [{tab, settings, messages}].
import { parseQuery } from "../../web/static/links.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { specs, tabs, queries } = JSON.parse(input);
console.log(JSON.stringify(queries.map((q) => parseQuery(q, specs, tabs))));
