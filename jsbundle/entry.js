// The plotly.js the dashboard draws with: scatter (in core), bar and heatmap, and nothing else.
// A third smaller than plotly.js's cartesian partial bundle (no calendars, box, violin, contour,
// histogram, pie, image or ternary), so a first page load evaluates less script.
var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap')]);

module.exports = Plotly;
