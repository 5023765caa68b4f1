"""The editions this project deploys, built from the app's own logic (playground/) and the build's
files (export/): the static edition, where every tab runs in the learner's browser
(``python -m deploy.static``), and the Hugging Face Space, the app itself or the static edition
(``python -m deploy.space USER/SPACE``). Nothing below this package imports it."""
