// Each table cell carries its column's heading (data-label), which extra.css shows before the
// cell where a narrow screen stacks a row's cells one under the other.
function labelTableCells() {
  for (const table of document.querySelectorAll(".md-typeset table:not([class])")) {
    const headings = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, index) => {
        if (headings[index]) cell.dataset.label = headings[index];
      });
    }
  }
}
if (typeof document$ !== "undefined") document$.subscribe(labelTableCells);
else document.addEventListener("DOMContentLoaded", labelTableCells);
