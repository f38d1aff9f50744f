"""What makes pages load fast: prefetching page data, the polyfill, the plotly.js bundle."""
